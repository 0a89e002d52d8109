"""``--max-cost`` on a Ray cluster: the pass's :class:`~limbo.run.budget.Spend` in one actor on
the driver's node, asked by every worker before each episode starts (:class:`ActorBudget`).

A round trip per episode is nothing beside a real model's episode (budgets are for those);
a grid without ``--max-cost`` makes no actor and asks nothing. A worker whose episode is
refused answers its batch's cells as ``refused``, and the driver then hands out no more.
"""

from __future__ import annotations

from typing import Any

from limbo.run.budget import Spend


class BudgetKeeper:
    """The pass's spending (made a Ray actor by :func:`budget_actor`): one at a time."""

    def __init__(self, max_cost: float) -> None:
        self.spend = Spend(max_cost)

    def admit(self) -> bool:
        return self.spend.admit()

    def settle(self, cost: float) -> None:
        self.spend.settle(cost)

    def abandon(self) -> None:
        self.spend.abandon()

    def state(self) -> tuple[float, int, int, bool]:
        """``(spent, ended, in flight, closed)``."""
        s = self.spend
        return s.spent, s.ended, s.in_flight, s.closed


class ActorBudget:
    """:class:`~limbo.run.budget.Budget` of a :class:`BudgetKeeper` actor (pickled into each
    batch's setup)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def admit(self) -> bool:
        return bool(await self.actor.admit.remote())

    async def settle(self, cost: float) -> None:
        await self.actor.settle.remote(cost)

    async def abandon(self) -> None:
        await self.actor.abandon.remote()


def budget_actor(max_cost: float) -> ActorBudget:
    """A new :class:`BudgetKeeper` on the driver's node; it takes no CPU."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    return ActorBudget(ray.remote(BudgetKeeper).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
    ).remote(max_cost))
