"""How one episode's model turns were answered: by the provider or from the response cache.

A record is the same whether its turns came from the provider or the cache (that is what the
cache is for), so what the provider was actually asked — and billed — cannot be read from the
record's outcome. The executor that runs an episode binds a fresh :class:`Calls` around it
(:func:`counting`), the provider adapters add to it as they answer, and the count goes into
the record's ``runtime.model_calls`` (the one part of a record allowed to differ between two
runs of a cell): the run's summary line, its forecast's actuals and ``limbo status`` read it
there. An episode whose adapter calls no provider (a reference policy) counts nothing and its
record has no ``model_calls``. Calls an adapter makes outside the episode's task (a production
harness reaching its model through the gateway's thread) are not seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Calls:
    """The turns of one episode, by where their answer came from."""

    responses: int = 0
    """Turns the provider answered (each billed)."""
    cached: int = 0
    """Turns replayed from the response cache (free)."""
    attempts: int = 0
    """HTTP attempts made for the provider's turns, retries included."""
    billed_usd: float | None = 0.0
    """What the provider's turns cost; ``None`` when any of them had no known price."""

    def answered(self, cost: float | None) -> None:
        self.responses += 1
        self.billed_usd = None if cost is None or self.billed_usd is None \
            else round(self.billed_usd + cost, 10)

    def to_json(self) -> dict[str, Any]:
        return {"responses": self.responses, "cached": self.cached, "attempts": self.attempts,
                "billed_usd": self.billed_usd}

    @property
    def seen(self) -> bool:
        return bool(self.responses or self.cached or self.attempts)


_current: ContextVar[Calls | None] = ContextVar("limbo_model_calls", default=None)


def current() -> Calls | None:
    """The count of the episode running here; ``None`` outside a counted episode."""
    return _current.get()


@contextlib.contextmanager
def counting() -> Iterator[Calls]:
    """A fresh count for the code (and the tasks it starts) inside the block."""
    calls = Calls()
    token = _current.set(calls)
    try:
        yield calls
    finally:
        _current.reset(token)
