"""One call limiter for every process of a run: a keeper that *leases* call slots to them.

Each process's adaptive limiter (:mod:`limbo.providers.limiter`) learns on its own how many
calls a provider takes. With N worker processes — forked (``--workers``) or on a Ray cluster —
each would learn it and together send N times what the provider accepts. So a run with workers
has one :class:`SlotKeeper`, holding one :class:`~limbo.providers.limiter.AimdState` per
provider, endpoint and key — the same arithmetic as a local run — and every worker's episodes
reach it through a :class:`LeasedLimiter`, installed with
:func:`~limbo.providers.limiter.set_limiter_factory` as the worker starts. Where the keeper
lives is the executor's: a thread of the ``limbo run`` process for forked workers
(:mod:`limbo.run.limiter_host`), an actor on the driver's node for Ray
(:mod:`limbo.run.ray.leases`); a :class:`SlotHost` is how a worker reaches it.

Why leases: a round trip to the keeper for every call cost each episode about 0.1 s on a loaded
machine, and twice the worker CPU. So a worker's :class:`LeasedLimiter` keeps the slots it was
granted and reuses them: a call that ends hands its slot to the next call waiting in the same
worker, with no message. The keeper still counts every leased slot as a call in flight — the sum
of the slots leased over the workers never grows past its limit, since it grants only below
the limit — and still hears every call's outcome, a few at a time:

- ``lease(key, lessee, want)`` waits until a slot is free, and grants up to ``want`` of them.
- ``settle(key, lessee, kept, back, idle)``, sent at most every :data:`HOLD_S`: the outcomes of
  the calls whose slots the worker keeps (the keeper counts them as ended and started again),
  of those whose slots it gives back, and how many idle slots it gives back. A ``429``'s slot
  always goes back, at once: the limit drops to the slots still leased, for every worker
  — no worker gets another slot until one comes back, as a local limiter starts no call until
  one ends.
- A slot a worker has not used for a whole :data:`HOLD_S` goes back, so that idle workers hold
  nothing another could use, and a full limiter means calls in flight (its additive increase
  counts on that).
- ``forget(lessee)``: the executor lost that worker (its node died, its process exited); its
  slots go back.

A wait that is cancelled (its episode's timeout) never leaks a slot: a slot granted to it goes
back to its worker's pool, which gives it to the next call or back to the keeper.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Protocol

from limbo.base.errors import UsageError
from limbo.base.runtime import stopwatch
from limbo.providers.limiter import OVERLOAD, AimdState

HOLD_S = 0.05
"""How long a worker keeps call outcomes (and idle slots) before it settles with the keeper:
the delay before another worker hears of a ``429`` is at most this and a round trip."""

Outcome = tuple[int | None, float | None]
"""A call's HTTP status (``None``: no answer) and the ``Retry-After`` it was sent."""


class _Slots:
    """One key's slots: the AIMD state, who holds how many, and the leases waiting."""

    def __init__(self) -> None:
        self.state = AimdState()
        self.leased: dict[str, int] = {}
        self.queue: deque[tuple[str, int, asyncio.Future[int]]] = deque()
        self.timer: asyncio.TimerHandle | None = None
        self.calls = 0
        """Calls whose outcome the keeper heard of."""
        self.refused = 0
        """Of those, refused as overloaded (``429``, ``503``, ``529``)."""
        self.lessees: set[str] = set()
        """Every worker that was ever leased a slot."""
        self.lowest = int(self.state.limit)
        """The lowest the limit went."""

    def heard(self, status: int | None) -> None:
        self.calls += 1
        self.refused += status is not None and status in OVERLOAD

    async def lease(self, lessee: str, want: int) -> int:
        if not self.queue and self.state.may_start(stopwatch()):
            return self._grant(lessee, want)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.queue.append((lessee, want, future))
        self.dispatch()
        return await future

    def _grant(self, lessee: str, want: int) -> int:
        n, now = 0, stopwatch()
        while n < max(1, want) and self.state.may_start(now):
            self.state.started()
            n += 1
        self.leased[lessee] = self.leased.get(lessee, 0) + n
        self.lessees.add(lessee)
        return n

    def dispatch(self) -> None:
        """Grant the leases waiting, in order, while slots are free; wake when a pause ends."""
        while self.queue and self.state.may_start(stopwatch()):
            lessee, want, future = self.queue.popleft()
            if not future.done():
                future.set_result(self._grant(lessee, want))
        left = self.state.pause_left(stopwatch())
        if self.queue and left > 0 and self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(left, self._after_pause)

    def _after_pause(self) -> None:
        self.timer = None
        self.dispatch()

    def settle(self, lessee: str, kept: list[Outcome], back: list[Outcome], idle: int) -> None:
        now, held = stopwatch(), self.leased.get(lessee, 0)
        for status, retry_after_s in kept:  # ended, and its slot started the next call
            self.heard(status)
            self.state.finished(status, retry_after_s, now)
            self.state.started()
        returned = back[:held] + [(None, None)] * max(0, min(idle, held - len(back)))
        for status, _retry_after in back[:held]:
            self.heard(status)
        for status, retry_after_s in returned:
            self.state.finished(status, retry_after_s, now)
        self.leased[lessee] = held - len(returned)
        self.lowest = min(self.lowest, int(self.state.limit))
        self.dispatch()

    def forget(self, lessee: str) -> None:
        for _ in range(self.leased.pop(lessee, 0)):
            self.state.finished(None, None, stopwatch())
        self.dispatch()


class SlotKeeper:
    """The call slots of a run's workers, by key: hosted where the executor says (a thread of
    the ``limbo run`` process, a Ray actor), reached through a :class:`SlotHost`."""

    def __init__(self) -> None:
        self.slots: dict[str, _Slots] = {}
        self.gone: set[str] = set()
        """Lessees forgotten (lost workers): whatever they are granted later goes back."""

    def _slots(self, key: str) -> _Slots:
        slots = self.slots.get(key)
        if slots is None:
            slots = self.slots[key] = _Slots()
        return slots

    async def lease(self, key: str, lessee: str, want: int) -> int:
        """Wait for a free slot; lease up to ``want`` (at least one) to ``lessee``."""
        slots = self._slots(key)
        n = await slots.lease(lessee, want)
        if lessee in self.gone:  # granted after its worker was lost: straight back
            slots.forget(lessee)
        return n

    async def settle(self, key: str, lessee: str, kept: list[Outcome], back: list[Outcome],
                     idle: int) -> None:
        """Calls' outcomes, and the slots given back."""
        if lessee not in self.gone:
            self._slots(key).settle(lessee, kept, back, idle)

    async def forget(self, lessee: str) -> None:
        """``lessee`` is lost (its node died): the slots it held go back."""
        self.gone.add(lessee)
        for slots in self.slots.values():
            slots.forget(lessee)

    async def snapshot(self) -> tuple[int, int]:
        """``(slots leased, limit)`` summed over every key: the slots leased are the calls in
        flight, give or take those a worker holds for its next call."""
        views = [s.state.view() for s in self.slots.values()]
        return sum(v[0] for v in views), sum(v[1] for v in views)

    async def leases(self, key: str) -> dict[str, int]:
        """Slots leased per lessee for ``key`` (what the progress line and tests read)."""
        return {k: v for k, v in self._slots(key).leased.items() if v}

    async def report(self) -> dict[str, dict[str, int]]:
        """Per key: its limit now and the lowest it went, the calls the keeper heard of, how
        many were refused, and how many workers shared it (what the run's manifest records of
        the shared limiter)."""
        return {key: {"limit": s.state.view()[1], "lowest": s.lowest, "calls": s.calls,
                      "refused": s.refused, "workers": len(s.lessees)}
                for key, s in sorted(self.slots.items())}


class SlotHost(Protocol):
    """How a worker reaches its run's :class:`SlotKeeper` (the same calls, awaited)."""

    async def lease(self, key: str, lessee: str, want: int) -> int:
        """:meth:`SlotKeeper.lease`."""

    async def settle(self, key: str, lessee: str, kept: list[Outcome], back: list[Outcome],
                     idle: int) -> None:
        """:meth:`SlotKeeper.settle`."""

    async def snapshot(self) -> tuple[int, int]:
        """:meth:`SlotKeeper.snapshot`."""


class LeasedLimiter:
    """:class:`~limbo.providers.limiter.CallLimiter` for one key in one worker: a pool of the
    slots leased from the run's :class:`SlotKeeper`, handed to this worker's calls in order of
    arrival."""

    def __init__(self, key: str, host: SlotHost, lessee: str) -> None:
        self.key, self.host, self.lessee = key, host, lessee
        self.busy = 0
        """Slots held by calls (or granted to a waiter not yet resumed)."""
        self.free = 0
        self.low = 0
        """The fewest slots free since the last settle: idle that long, they go back."""
        self.waiters: deque[asyncio.Future[None]] = deque()
        self.kept: list[Outcome] = []
        self.back: list[Outcome] = []
        self.leasing: asyncio.Task[None] | None = None
        self.settling: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    async def acquire(self) -> None:
        if self.free and not self.waiters:
            self._take()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(future)
        if self.leasing is None:
            self.leasing = asyncio.ensure_future(self._lease())
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted already: the slot stays here
                self.busy -= 1
                self._put()
            else:
                with contextlib.suppress(ValueError):
                    self.waiters.remove(future)
            raise

    async def release(self, status: int | None, retry_after_s: float | None) -> None:
        """Kept for the next call here, or — refused — given back at once."""
        self.busy -= 1
        if status is not None and status in OVERLOAD:
            self.back.append((status, retry_after_s))
            self._settle_soon(at_once=True)
            return
        self.kept.append((status, retry_after_s))
        self._put()

    async def snapshot(self) -> tuple[int, int]:
        in_flight, limit = await self.host.snapshot()
        return int(in_flight), int(limit)

    def _take(self) -> None:
        self.free -= 1
        self.low = min(self.low, self.free)
        self.busy += 1

    def _put(self) -> None:
        """A slot this worker holds is free: to the next waiter, else kept a while."""
        self.free += 1
        self._give()
        self._settle_soon()

    def _give(self) -> None:
        while self.free and self.waiters:
            future = self.waiters.popleft()
            if not future.done():
                self._take()
                future.set_result(None)

    async def _lease(self) -> None:
        try:
            while want := sum(1 for f in self.waiters if not f.done()):
                self.free += await self.host.lease(self.key, self.lessee, want)
                self._give()
                self._settle_soon()  # slots left over go back if nobody takes them
        except Exception as exc:  # noqa: BLE001 - the keeper is gone: the run cannot go on
            # A UsageError, not the Ray error: no boundary turns it into an episode's
            # infra_error record, so the cells waiting here stay unrecorded and a re-run
            # runs them, instead of the run counting them as done.
            lost = UsageError(f"the run's shared call limiter is gone ({type(exc).__name__}); the "
                              f"episodes that finished are recorded, re-run to resume")
            for future in self.waiters:
                if not future.done():
                    future.set_exception(lost)
            self.waiters.clear()
        finally:
            self.leasing = None

    def _settle_soon(self, at_once: bool = False) -> None:
        if self.settling is not None:
            return
        if at_once or self.timer is None:
            if self.timer is not None:
                self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(
                0 if at_once else HOLD_S, self._start_settle)

    def _start_settle(self) -> None:
        self.timer = None
        if self.settling is None:
            self.settling = asyncio.ensure_future(self._settle())

    async def _settle(self) -> None:
        try:
            idle, self.free = self.low, self.free - self.low
            self.low = self.free
            kept, back, self.kept, self.back = self.kept, self.back, [], []
            if kept or back or idle:
                await self.host.settle(self.key, self.lessee, kept, back, idle)
        except Exception:  # noqa: BLE001 - the keeper is gone: the next lease says so
            return
        finally:
            self.settling = None
        if self.kept or self.back or self.free:
            self._settle_soon(at_once=bool(self.back))  # a refusal came in meanwhile
