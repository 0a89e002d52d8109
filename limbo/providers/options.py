"""The response cache and price files the episodes running here use: given by whoever runs
them, for those episodes only.

``limbo run --cache-dir/--no-cache/--prices`` choose them once, at the command's edge, into the
run's :class:`~limbo.run.context.Settings`. A module-level setting the command wrote would be
seen by every later run of the process (a second grid, a test, a Ray worker's next run) and
could not differ between two runs at once; so each executor binds the run's options around its
episodes (:func:`using`, a context variable the episodes' tasks inherit) — in this process,
in each forked worker, in each Ray worker — and the adapters read them through
:func:`current` as they are built. Outside any binding (a library user, ``limbo mcp``, an
Inspect eval) the environment decides: ``LIMBO_CACHE_DIR`` and ``LIMBO_PRICES``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderOptions:
    """What a run chose for its adapters."""

    cache_root: str | None = None
    """The response cache's directory; ``None``: no cache (whatever ``LIMBO_CACHE_DIR`` says)."""
    price_files: tuple[str, ...] = ()
    """Price files extending the shipped table and ``LIMBO_PRICES``'s, later ones winning."""


_bound: ContextVar[ProviderOptions | None] = ContextVar("limbo_provider_options", default=None)


def current() -> ProviderOptions | None:
    """The options bound for the code running here; ``None``: none were (the environment's)."""
    return _bound.get()


@contextlib.contextmanager
def using(options: ProviderOptions) -> Iterator[ProviderOptions]:
    """Bind ``options`` for the code (and the tasks it starts) inside the block."""
    token = _bound.set(options)
    try:
        yield options
    finally:
        _bound.reset(token)
