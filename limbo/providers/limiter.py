"""How many provider calls a process keeps in flight: one adaptive limiter per provider,
endpoint and key, shared by every episode of the process.

``--concurrency`` says how many *episodes* may run at once; a provider says, with ``429`` (and
``503``/``529`` "overloaded"), how many *calls* it will take. Without a shared limiter every
episode learns that on its own: a grid at ``--concurrency 128`` against an endpoint that takes
16 calls at a time sends wave after wave of refused calls, each waiting out its
``Retry-After`` (:mod:`limbo.providers.retry`). With one, the process learns it once.

The decisions live in :class:`AimdState`, a plain synchronous class that is handed the time,
so that a limiter shared across processes (an actor) can reuse it unchanged:

- **additive increase**: a call answered while the limiter was (nearly) full raises the limit
  by ``1/limit`` — one more call in flight per round trip. Until the first refusal it grows by
  a whole call per answer instead (doubling per round trip), from :data:`START_LIMIT`.
- **decrease on refusal**: each refused call gives its slot back — the limit drops by one and
  never stays above the calls still in flight — so a burst of refusals brings the limit down to
  what the provider actually accepted, in one round trip rather than one halving per round trip.
- **Retry-After**: the refused call itself waits it out (:mod:`limbo.providers.retry`). When
  the limit is already at its floor — the provider refuses even one call at a time, i.e. a quota
  is spent — nobody starts a call until ``Retry-After`` (else one second) has passed.

Transport errors and other statuses say nothing about capacity: they only free their slot.

The interface, :class:`CallLimiter`, is async so that a limiter may live elsewhere (a Ray
actor shared by a cluster); :func:`set_limiter_factory` substitutes it for the local one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from limbo.base.runtime import stopwatch

START_LIMIT = 128
"""Calls in flight allowed before the provider has said anything."""
MAX_LIMIT = 10_000
OVERLOAD = frozenset({429, 503, 529})
"""Statuses that mean "too many calls": rate limited, unavailable, overloaded."""
FLOOR_PAUSE_S = 1.0
"""Pause when refused at the floor and no ``Retry-After`` was given."""


@runtime_checkable
class CallLimiter(Protocol):
    """What every limiter offers; the caller pairs each :meth:`acquire` with one
    :meth:`release`."""

    async def acquire(self) -> None:
        """Wait for a slot (may sleep for a ``Retry-After``)."""

    async def release(self, status: int | None, retry_after_s: float | None) -> None:
        """Report the call's outcome: its HTTP status, or ``None`` for a transport error (or a
        call that never got an answer), and the server's ``Retry-After`` if it sent one."""

    async def snapshot(self) -> tuple[int, int]:
        """``(calls in flight, current limit)``."""


@dataclass
class AimdState:
    """The limiter's arithmetic (no I/O, no clock of its own: ``now`` is passed in)."""

    limit: float = START_LIMIT
    floor: int = 1
    ceiling: int = MAX_LIMIT
    in_flight: int = 0
    slow_start: bool = True
    paused_until: float = 0.0

    def may_start(self, now: float) -> bool:
        return now >= self.paused_until and self.in_flight < int(self.limit)

    def pause_left(self, now: float) -> float:
        return max(0.0, self.paused_until - now)

    def started(self) -> None:
        self.in_flight += 1

    def finished(self, status: int | None, retry_after_s: float | None, now: float) -> None:
        """One call ended with ``status``: adjust the limit."""
        was_full = self.in_flight >= int(self.limit) - 1
        self.in_flight = max(0, self.in_flight - 1)
        if status is not None and status in OVERLOAD:
            self.on_overload(retry_after_s, now)
        elif status is not None and 200 <= status < 300 and was_full:
            self.on_success()

    def on_success(self) -> None:
        step = 1.0 if self.slow_start else 1.0 / self.limit
        self.limit = min(float(self.ceiling), self.limit + step)

    def on_overload(self, retry_after_s: float | None, now: float) -> None:
        at_floor = int(self.limit) <= self.floor
        self.slow_start = False
        self.limit = float(max(self.floor, min(self.limit - 1.0, self.in_flight)))
        if at_floor:
            wait = FLOOR_PAUSE_S if retry_after_s is None else max(0.0, retry_after_s)
            self.paused_until = max(self.paused_until, now + wait)

    def view(self) -> tuple[int, int]:
        return self.in_flight, int(self.limit)


class _Waiter:
    __slots__ = ("future", "granted")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future, self.granted = future, False


class LocalLimiter:
    """:class:`CallLimiter` for one process: callers wait in order of arrival. Thread-safe (a
    gateway on its own thread may share it with the run's loop)."""

    def __init__(self, key: str = "", state: AimdState | None = None,
                 clock: Callable[[], float] = stopwatch) -> None:
        self.key, self.state, self.clock = key, state or AimdState(), clock
        self._lock = threading.Lock()
        self._queue: deque[_Waiter] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    async def acquire(self) -> None:
        with self._lock:
            if not self._queue and self.state.may_start(self.clock()):
                self.state.started()
                return
            waiter = _Waiter(asyncio.get_running_loop().create_future())
            self._queue.append(waiter)
            self._dispatch()
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                if waiter.granted:  # the slot was ours already: give it back
                    self.state.in_flight = max(0, self.state.in_flight - 1)
                    self._dispatch()
                else:
                    with contextlib.suppress(ValueError):
                        self._queue.remove(waiter)
            raise

    async def release(self, status: int | None, retry_after_s: float | None) -> None:
        with self._lock:
            self.state.finished(status, retry_after_s, self.clock())
            self._dispatch()

    async def snapshot(self) -> tuple[int, int]:
        return self.peek()

    def peek(self) -> tuple[int, int]:
        """:meth:`snapshot` without awaiting (for the progress line)."""
        with self._lock:
            return self.state.view()

    def _dispatch(self) -> None:
        """Hand free slots to waiters in order (lock held); wake again when a pause ends."""
        now = self.clock()
        while self._queue and self.state.may_start(now):
            waiter = self._queue.popleft()
            loop = waiter.future.get_loop()
            if waiter.future.done() or loop.is_closed():
                continue
            waiter.granted = True
            self.state.started()
            loop.call_soon_threadsafe(_grant, waiter.future)
        left = self.state.pause_left(now)
        if self._queue and left > 0 and not self._timer_alive():
            loop = asyncio.get_running_loop()  # always called from a loop: acquire, release
            self._timer, self._timer_loop = loop.call_later(left, self._after_pause), loop

    def _timer_alive(self) -> bool:
        """A wake-up is armed on a loop that still runs (a run that ended mid-pause leaves
        one behind on its closed loop)."""
        return (self._timer is not None and not self._timer.cancelled()
                and self._timer_loop is not None and not self._timer_loop.is_closed())

    def _after_pause(self) -> None:
        with self._lock:
            self._timer = None
            self._dispatch()


def _grant(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# ------------------------------------------------------------------ the per-process registry

_registry: dict[str, CallLimiter] = {}
_registry_lock = threading.Lock()
_factory: Callable[[str], CallLimiter] | None = None


def limiter_key(provider: str, endpoint: str, api_key: str) -> str:
    """``provider|endpoint|sha256(key)[:12]``: calls that share a provider's quota share a
    limiter; the key itself never appears."""
    return f"{provider}|{endpoint}|{hashlib.sha256(api_key.encode()).hexdigest()[:12]}"


def limiter_for(key: str) -> CallLimiter:
    """The limiter of ``key`` in this process (made on first use)."""
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = _factory(key) if _factory is not None else LocalLimiter(key)
            _registry[key] = limiter
        return limiter


def set_limiter_factory(factory: Callable[[str], CallLimiter] | None) -> None:
    """Make limiters with ``factory`` from now on (an executor that shares them across
    processes); ``None`` restores the local ones. Limiters made before are forgotten."""
    global _factory
    with _registry_lock:
        _factory = factory
        _registry.clear()


def reset() -> None:
    """Forget every limiter (a fresh process's state)."""
    with _registry_lock:
        _registry.clear()


def progress_note() -> str | None:
    """``model calls 12 in flight / limit 16`` over this process's limiters that can say so
    without awaiting; ``None`` when no provider call has been limited here."""
    with _registry_lock:
        limiters = list(_registry.values())
    views = [peek() for lim in limiters if (peek := getattr(lim, "peek", None)) is not None]
    if not views:
        return None
    return (f"model calls {sum(v[0] for v in views)} in flight / limit "
            f"{sum(v[1] for v in views)}")


os.register_at_fork(after_in_child=reset)
