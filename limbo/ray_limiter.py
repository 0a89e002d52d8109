"""One call limiter for a whole Ray cluster: an actor every episode's provider calls consult.

Each process's adaptive limiter (:mod:`limbo.providers.limiter`) learns on its own how many
calls a provider takes. On a cluster, N nodes would each learn it and together send N times
what the provider accepts; the per-provider limit would hold per node, not per run. So a Ray
run has one :class:`LimiterActor`, on the driver's node (which the run cannot outlive anyway),
holding one :class:`~limbo.providers.limiter.LocalLimiter` per provider, endpoint and key —
the same AIMD arithmetic as a local run — and every worker's episodes reach it through a
:class:`RayLimiter`, installed with :func:`~limbo.providers.limiter.set_limiter_factory`.

Each slot is a *ticket* (node, process, counter). An episode whose wait is cancelled (its
timeout) drops its ticket: a slot granted to it, or granted later, goes back at once, so a
cancelled wait never leaks a slot. A call costs one actor round trip (acquire; the release is
sent without waiting): about a millisecond on one machine, nothing beside a model's latency.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

from limbo.providers.limiter import LocalLimiter


class LimiterActor:
    """The cluster's limiters by key (made a Ray actor by :func:`limiter_actor`)."""

    def __init__(self) -> None:
        self.limiters: dict[str, LocalLimiter] = {}
        self.granted: dict[str, str] = {}
        """Ticket -> key of every slot held."""
        self.dropped: set[str] = set()
        """Tickets given up before their slot was granted."""

    def _limiter(self, key: str) -> LocalLimiter:
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = LocalLimiter(key)
        return limiter

    async def acquire(self, key: str, ticket: str) -> None:
        limiter = self._limiter(key)
        await limiter.acquire()
        if ticket in self.dropped:  # its caller stopped waiting: the slot goes straight back
            self.dropped.discard(ticket)
            await limiter.release(None, None)
            return
        self.granted[ticket] = key

    async def release(self, ticket: str, status: int | None,
                      retry_after_s: float | None) -> None:
        key = self.granted.pop(ticket, None)
        if key is not None:
            await self.limiters[key].release(status, retry_after_s)

    async def drop(self, ticket: str) -> None:
        """The caller of ``acquire(..., ticket)`` gave up waiting."""
        if ticket in self.granted:
            await self.release(ticket, None, None)
        else:
            self.dropped.add(ticket)

    async def snapshot(self) -> tuple[int, int]:
        """``(calls in flight, limit)`` summed over every key."""
        views = [lim.peek() for lim in self.limiters.values()]
        return sum(v[0] for v in views), sum(v[1] for v in views)


def limiter_actor(node_id: str) -> Any:
    """A new :class:`LimiterActor` on node ``node_id`` (the driver's). It takes no CPU: it
    waits, and must never queue behind the episodes."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(LimiterActor).options(
        num_cpus=0, max_concurrency=10_000,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)).remote()


_tickets = itertools.count()


class RayLimiter:
    """:class:`~limbo.providers.limiter.CallLimiter` for one key, backed by the cluster's
    actor. Any slot this process holds for the key may pair with a release: the actor counts
    per key."""

    def __init__(self, key: str, actor: Any, node: str) -> None:
        self.key, self.actor, self.node = key, actor, node
        self.held: list[str] = []

    async def acquire(self) -> None:
        ticket = f"{self.node}/{os.getpid()}/{next(_tickets)}"
        try:
            await self.actor.acquire.remote(self.key, ticket)
        except asyncio.CancelledError:
            self.actor.drop.remote(ticket)
            raise
        self.held.append(ticket)

    async def release(self, status: int | None, retry_after_s: float | None) -> None:
        """Sent, not awaited: the actor handles one caller's calls in order, and the episode
        need not wait a round trip to go on."""
        if self.held:
            self.actor.release.remote(self.held.pop(), status, retry_after_s)

    async def snapshot(self) -> tuple[int, int]:
        in_flight, limit = await self.actor.snapshot.remote()
        return int(in_flight), int(limit)
