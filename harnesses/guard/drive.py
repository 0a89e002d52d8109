"""How the guard's steps meet the outside world: what they ask for, and the two drivers' help.

The steps (:meth:`limbo.harnesses.guard.core.Guard._steps`) are one generator, free of I/O, that
*yields* a need — :class:`CallNeed` (run a tool or policy) or :class:`JoinNeed` (wait for an
identical call in flight, :class:`Slot`) — and receives the answer. The async driver awaits what
needs awaiting; the sync driver calls straight through (:func:`settle_sync`). Both resume the
generator with :func:`advance`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from limbo.harnesses.guard.receipts import GuardResult, GuardUsageError


@dataclass
class CallNeed:
    """Need: call ``fn(*args, **kwargs)`` (awaiting the result if it is awaitable)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


class Slot:
    """An execution in flight that identical calls may join (step 5)."""

    def __init__(self, tool: str, fp: str) -> None:
        self.tool, self.fp = tool, fp
        self.done = False
        self.result: GuardResult | None = None
        self.exc: BaseException | None = None
        self.event = asyncio.Event()

    def settle(self, result: GuardResult | None, exc: BaseException | None = None) -> None:
        self.result, self.exc, self.done = result, exc, True
        self.event.set()


@dataclass
class JoinNeed:
    """Need: wait until ``slot`` settles (the sync driver cannot, and answers ``None``)."""

    slot: Slot


Steps = Generator[CallNeed | JoinNeed, Any, GuardResult]


def advance(steps: Any, reply: Any, thrown: BaseException | None) -> tuple[bool, Any]:
    """Resume the step generator with a reply or an exception: (finished, need or result).

    The steps are written once, free of I/O; the sync and async drivers only differ in how
    they serve each need.
    """
    try:
        return False, steps.throw(thrown) if thrown is not None else steps.send(reply)
    except StopIteration as stop:
        return True, stop.value


def settle_sync(out: Any) -> Any:
    if not inspect.isawaitable(out):
        return out
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_wait(out))
    if inspect.iscoroutine(out):
        out.close()
    raise GuardUsageError("an async tool or policy cannot run through call_sync inside a "
                          "running event loop; use `await guard.call(...)`")


async def _wait(aw: Awaitable[Any]) -> Any:
    return await aw
