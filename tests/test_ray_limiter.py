"""The cluster's one call limiter (limbo/run/ray/leases.py) on a real two-node Ray cluster: a
:class:`~limbo.run.leases.SlotKeeper` actor on the head, and worker processes — one per node — each holding the
:class:`RayLimiter` a worker's episodes use, driven here through a small actor of this module.

The slots leased over both workers never pass the limit; a ``429`` seen by one worker stops
the other from getting more; a cancelled wait leaks nothing, nor does a lost worker. Nothing
here times anything: every wait is for a state, with a deadline only to fail instead of hang.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.ray_cluster import Cluster

ray = pytest.importorskip("ray")

from limbo.providers.limiter import START_LIMIT, CallLimiter  # noqa: E402
from limbo.run.ray.leases import HOLD_S, RayLimiter, limiter_actor  # noqa: E402


class Caller:
    """A worker's limiter for one key, and the calls it holds slots for."""

    def __init__(self, actor: Any, key: str, name: str) -> None:
        self.limiter = RayLimiter(key, actor, name)
        self.waits: list[asyncio.Future[None]] = []
        self.held = 0

    async def ask(self, n: int) -> None:
        """Start ``n`` calls' waits for a slot; they hold one once granted."""
        self.waits += [asyncio.ensure_future(self.limiter.acquire()) for _ in range(n)]

    async def holding(self) -> tuple[int, int]:
        """``(slots held by calls, waits not granted)``."""
        granted = [w for w in self.waits if w.done() and not w.cancelled()]
        return len(granted) - self.held, len(self.waits) - len(granted)

    async def end(self, n: int, status: int) -> None:
        """``n`` of the calls holding a slot end with ``status``."""
        for _ in range(n):
            self.held += 1
            await self.limiter.release(status, None)

    async def cancel_waits(self) -> None:
        waiting = [w for w in self.waits if not w.done()]
        for w in waiting:
            w.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        self.waits = [w for w in self.waits if not w.cancelled()]

    async def failures(self) -> list[str]:
        """How the waits that failed failed."""
        return [f"{type(w.exception()).__name__}: {w.exception()}" for w in self.waits
                if w.done() and not w.cancelled() and w.exception() is not None]

    async def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    async def pool(self) -> tuple[int, int, int]:
        """The worker's own view: ``(busy, free, waiting)``."""
        lim = self.limiter
        return lim.busy, lim.free, len(lim.waiters)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with Cluster(cpus=1, extra=1) as c:
        ray.init(address=c.address, namespace="limbo-test", log_to_driver=False,
                 logging_level="ERROR")
        try:
            yield c
        finally:
            ray.shutdown()


def _setup(key: str) -> tuple[Any, Any, Any]:
    """The limiter on this (the head) node, and a caller on each node (one CPU each)."""
    actor = limiter_actor(ray.get_runtime_context().get_node_id())
    a, b = (ray.remote(Caller).options(num_cpus=1).remote(actor, key, name)
            for name in ("a", "b"))
    nodes = ray.get([w.node.remote() for w in (a, b)])
    assert len(set(nodes)) == 2  # two processes, on two nodes
    return actor, a, b


def until(check: Callable[[], bool], what: str, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def held(caller: Any) -> tuple[int, int]:
    return tuple(ray.get(caller.holding.remote()))  # type: ignore[return-value]


def test_a_worker_limiter_is_a_call_limiter() -> None:
    assert isinstance(RayLimiter("k", None, "a"), CallLimiter)


def test_the_slots_of_two_workers_never_pass_the_limit(cluster: Cluster) -> None:
    actor, a, b = _setup("limit")
    ray.get(a.ask.remote(100))
    until(lambda: held(a) == (100, 0), "a holds 100")
    ray.get(b.ask.remote(100))
    until(lambda: held(b) == (START_LIMIT - 100, 100 - (START_LIMIT - 100)), "b holds the rest")
    for _ in range(int(4 * HOLD_S / 0.02)):  # b's waits stay waiting: the cluster is full
        leased, limit = ray.get(actor.snapshot.remote())
        assert leased <= limit == START_LIMIT
        assert held(b) == (START_LIMIT - 100, 100 - (START_LIMIT - 100))
        time.sleep(0.02)
    assert ray.get(actor.leases.remote("limit")) == {"a": 100, "b": START_LIMIT - 100}
    ray.get(a.end.remote(50, 200))  # a's slots, idle there, go back and on to b's waits
    until(lambda: sum(held(b)) == 100 and held(b)[0] == min(100, _limit(actor) - 50),
          "b got the slots a gave back")
    leased, limit = ray.get(actor.snapshot.remote())
    assert leased == 50 + held(b)[0] <= limit


def _limit(actor: Any) -> int:
    return int(ray.get(actor.snapshot.remote())[1])


def test_a_refusal_on_one_worker_stops_the_other_getting_slots(cluster: Cluster) -> None:
    actor, a, b = _setup("refused")
    ray.get([a.ask.remote(60), b.ask.remote(60)])
    until(lambda: held(a) == (60, 0) and held(b) == (60, 0), "both hold 60")
    ray.get(a.end.remote(1, 429))  # a's provider refused a call: its slot goes back at once
    until(lambda: ray.get(actor.snapshot.remote()) == (119, 119), "the limit dropped to 119")
    ray.get(b.ask.remote(5))  # 128 would have had room for them; 119 has none
    for _ in range(int(4 * HOLD_S / 0.02)):
        assert held(b) == (60, 5)
        time.sleep(0.02)
    ray.get(b.end.remote(2, 200))  # b's own ended calls hand their slots to its waits
    until(lambda: held(b) == (60, 3), "b's waits took b's own slots")
    assert ray.get(actor.snapshot.remote())[0] <= 119


def test_a_cancelled_wait_and_a_lost_worker_leak_no_slot(cluster: Cluster) -> None:
    actor, a, b = _setup("cancel")
    ray.get(a.ask.remote(START_LIMIT))
    until(lambda: held(a) == (START_LIMIT, 0), "a holds every slot")
    ray.get(b.ask.remote(3))
    until(lambda: ray.get(b.pool.remote()) == (0, 0, 3), "b waits")
    ray.get(b.cancel_waits.remote())  # its episodes timed out while waiting
    ray.get(a.end.remote(START_LIMIT, 200))
    until(lambda: ray.get(actor.leases.remote("cancel")) == {}, "every slot went back")
    assert ray.get(actor.snapshot.remote())[0] == 0
    assert ray.get(b.pool.remote()) == (0, 0, 0)
    ray.get(b.ask.remote(7))  # a lost worker's slots go back with it
    until(lambda: held(b) == (7, 0), "b holds 7")
    ray.get(actor.forget.remote("b"))
    assert ray.get(actor.leases.remote("cancel")) == {}
    assert ray.get(actor.snapshot.remote())[0] == 0
    ray.get(b.end.remote(7, 200))  # a forgotten worker's late reports change nothing
    time.sleep(2 * HOLD_S)
    assert ray.get(actor.snapshot.remote())[0] == 0


def test_a_lost_limiter_stops_the_calls_waiting_on_it_as_the_run_stops(cluster: Cluster) -> None:
    """Not an error an episode would record as its ``infra_error`` (the cell then counted as
    done, never re-run): a :class:`UsageError`, which ends the run with one line."""
    actor, a, b = _setup("lost")
    ray.get(a.ask.remote(START_LIMIT))
    until(lambda: held(a) == (START_LIMIT, 0), "a holds every slot")
    ray.get(b.ask.remote(2))
    until(lambda: ray.get(b.pool.remote()) == (0, 0, 2), "b waits")
    ray.kill(actor)
    until(lambda: len(ray.get(b.failures.remote())) == 2, "b's waits fail")
    assert all(f.startswith("UsageError: the run's shared call limiter is gone")
               for f in ray.get(b.failures.remote()))
    ray.get(b.ask.remote(1))  # and so does a call that asks afterwards
    until(lambda: len(ray.get(b.failures.remote())) == 3, "a later wait fails too")
