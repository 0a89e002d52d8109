"""The run's one call limiter on a Ray cluster: the :class:`~limbo.run.leases.SlotKeeper` as an
actor on the driver's node (which the run cannot outlive anyway), and each worker's
:class:`RayLimiter` reaching it through :class:`ActorHost`. The leases themselves — slots kept
by a worker, outcomes settled a few at a time, a ``429``'s slot given back at once — are
:mod:`limbo.run.leases`'s, the same as forked workers'.
"""

from __future__ import annotations

from typing import Any

from limbo.run.leases import HOLD_S, LeasedLimiter, Outcome, SlotKeeper

__all__ = ["HOLD_S", "ActorHost", "RayLimiter", "limiter_actor"]


def limiter_actor(node_id: str) -> Any:
    """A new :class:`~limbo.run.leases.SlotKeeper` actor on node ``node_id`` (the driver's).
    It takes no CPU: it waits, and must never queue behind the episodes."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(SlotKeeper).options(
        num_cpus=0, max_concurrency=10_000,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)).remote()


class ActorHost:
    """:class:`~limbo.run.leases.SlotHost` of a keeper that is a Ray actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def lease(self, key: str, lessee: str, want: int) -> int:
        return int(await self.actor.lease.remote(key, lessee, want))

    async def settle(self, key: str, lessee: str, kept: list[Outcome], back: list[Outcome],
                     idle: int) -> None:
        await self.actor.settle.remote(key, lessee, kept, back, idle)

    async def snapshot(self) -> tuple[int, int]:
        in_flight, limit = await self.actor.snapshot.remote()
        return int(in_flight), int(limit)


class RayLimiter(LeasedLimiter):
    """A Ray worker's limiter for one key: slots leased from the cluster's actor."""

    def __init__(self, key: str, actor: Any, lessee: str) -> None:
        super().__init__(key, ActorHost(actor), lessee)
