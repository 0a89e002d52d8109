"""The cluster's one call limiter (limbo/ray_limiter.py), without a cluster: the actor's class
is plain Python, and a worker's :class:`RayLimiter` is driven through a stand-in handle whose
``.remote`` calls the actor in this loop — the way Ray would, one call after another."""

from __future__ import annotations

import asyncio
from typing import Any

from limbo.providers.limiter import AimdState, CallLimiter, LocalLimiter
from limbo.ray_limiter import LimiterActor, RayLimiter


class _Method:
    def __init__(self, call: Any, log: list[str]) -> None:
        self.call, self.log = call, log

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        """Like an ObjectRef: a caller that stops awaiting it does not cancel the call."""
        self.log.append(self.call.__name__)
        return asyncio.shield(asyncio.ensure_future(self.call(*args)))


class Handle:
    """What a worker holds: ``handle.acquire.remote(...)`` and so on, awaitable."""

    def __init__(self, actor: LimiterActor) -> None:
        self.log: list[str] = []
        for name in ("acquire", "release", "drop", "snapshot"):
            setattr(self, name, _Method(getattr(actor, name), self.log))


def _one_at_a_time(actor: LimiterActor, key: str) -> None:
    actor.limiters[key] = LocalLimiter(key, AimdState(limit=1, slow_start=False))


def test_slots_are_counted_per_key_over_every_caller() -> None:
    async def main() -> None:
        actor = LimiterActor()
        for ticket in ("n1/1/0", "n2/7/0", "n2/7/1"):
            await actor.acquire("openai|a", ticket)
        await actor.acquire("anthropic|b", "n1/1/1")
        assert actor.limiters["openai|a"].peek()[0] == 3  # two nodes' calls, one limiter
        assert await actor.snapshot() == (4, 2 * 128)
        await actor.release("n2/7/0", 200, None)
        await actor.release("n2/7/0", 200, None)  # a ticket releases once
        assert actor.limiters["openai|a"].peek()[0] == 2

    asyncio.run(main())


def test_a_refusal_on_one_node_lowers_the_limit_for_all() -> None:
    async def main() -> None:
        actor = LimiterActor()
        for i in range(20):
            await actor.acquire("k", f"n{i % 2}/1/{i}")
        await actor.release("n1/1/1", 429, None)
        _, limit = actor.limiters["k"].peek()
        assert limit == 19  # the calls still in flight, for every node's callers
        assert actor.limiters["k"].state.slow_start is False

    asyncio.run(main())


def test_a_wait_given_up_never_leaks_its_slot() -> None:
    async def main() -> None:
        actor = LimiterActor()
        _one_at_a_time(actor, "k")
        await actor.acquire("k", "a")
        waiting = asyncio.ensure_future(actor.acquire("k", "b"))
        await asyncio.sleep(0)
        assert not waiting.done()
        await actor.drop("b")  # its episode timed out while waiting
        await actor.release("a", 200, None)
        await waiting  # granted, and given straight back
        assert actor.limiters["k"].peek()[0] == 0 and actor.granted == {}
        await actor.acquire("k", "c")
        await actor.drop("c")  # dropped after its grant: released
        assert actor.limiters["k"].peek()[0] == 0

    asyncio.run(main())


def test_a_worker_limiter_pairs_acquires_and_releases_through_the_actor() -> None:
    async def main() -> None:
        actor = LimiterActor()
        _one_at_a_time(actor, "k")
        handle = Handle(actor)
        mine = RayLimiter("k", handle, "node1")
        assert isinstance(mine, CallLimiter)
        await mine.acquire()
        blocked = asyncio.ensure_future(mine.acquire())
        await asyncio.sleep(0.01)
        blocked.cancel()  # the episode's timeout
        await asyncio.gather(blocked, return_exceptions=True)
        assert "drop" in handle.log
        await mine.release(200, None)
        await asyncio.sleep(0.01)  # the release is sent, not awaited
        assert (await mine.snapshot())[0] == 0 and actor.granted == {}
        assert actor.dropped == set()  # the slot the cancelled wait was granted went back
        await asyncio.wait_for(mine.acquire(), 1)
        await mine.release(200, None)

    asyncio.run(main())
