"""``--executor ray``: :class:`RayExecutor`, the :class:`~limbo.run.context.Executor` of a Ray
cluster. The session (:mod:`limbo.run.ray.session`) connects and starts the workers and the
shared limiter; each pass runs on them (:class:`~limbo.run.ray.cluster.RayPool`) under its
budget actor (:mod:`limbo.run.ray.budget`)."""

from __future__ import annotations

from collections.abc import Iterator

from limbo.run.budget import Budget
from limbo.run.context import RunContext, Sink
from limbo.sim.cell import Cell


class RayExecutor:
    """Episodes on the connected cluster's workers; the command holds the connection."""

    def budget(self, max_cost: float) -> Budget:
        from limbo.run.ray.budget import budget_actor

        return budget_actor(max_cost)

    def run(self, cells: Iterator[Cell], ctx: RunContext, budget: Budget | None,
            sink: Sink) -> None:
        from limbo.run.ray.cluster import RayPool

        RayPool(ctx.settings, sink.total, budget).run(cells, sink.emit)

    def limits(self) -> dict[str, dict[str, int]] | None:
        import ray

        from limbo.run.ray.session import shared

        limiter = shared.get("limiter")
        return None if limiter is None else dict(ray.get(limiter.report.remote()))

    def close(self) -> None:
        pass
