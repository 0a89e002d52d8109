"""``limbo run``'s forecast of a pass (:mod:`limbo.run.forecast`) and its pilot.

Before a pass with real-model cells, the command forecasts what it will spend — dollars,
model calls, wall time, with 95 % intervals — from the episodes of each model the run
directory already holds, prints it and records it in the manifest (``forecast``); the pass
records what it spent (``actual``) when it ends, and ``limbo status`` sets one beside the
other. ``--dry-run`` prints the same per model, spending nothing.

Where no episode of a model is recorded, the forecast has nothing to learn from: ``--dry-run
--pilot N`` first runs, for real, N cells of each real model (the cells of each model that
come first in a fixed random order of their episode ids — a uniform sample of the grid, the
same every time), recorded in ``--out`` like any episode of the run, so the run itself never
runs them again and nothing is spent twice; then it forecasts the rest. A pilot tops up: a
model with N episodes recorded already runs none.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.run.forecast import gather, observed_records, rank
from limbo.run.kinds import calls_a_provider
from limbo.run.outlook import PassForecast, Probe, forecast_pass
from limbo.run.plan import Plan, in_shard
from limbo.run.shapes import Shape
from limbo.sim.cell import Cell
from limbo.sim.transport import joined


def forecast_of(cells: Iterable[Cell], todo: list[str], out: Path | None, kept: set[str],
                at_once: int) -> PassForecast | None:
    """The forecast of a pass that runs ``todo`` (``None`` when none of it calls a model),
    learning from the records in ``out`` of the cells it keeps."""
    from limbo.log.store import iter_records

    records = iter_records(out) if out is not None and out.is_dir() else iter([])
    observed = observed_records((r for r in records if r["episode_id"] in kept),
                                calls_a_provider)
    plans = gather(cells, set(todo), observed, calls_a_provider)
    if not any(p.todo.size for p in plans.values()):
        return None
    return forecast_pass(plans, _price, _probe(), max(1, min(at_once, len(todo))))


def _price(spec: str) -> dict[str, float] | None:
    from limbo.base.registry import lookup
    from limbo.commands.model_check import price
    from limbo.episode.models import parse_model

    provider, name, params = parse_model(spec)
    return price(lookup("model", provider), spec, name, params)


def _probe() -> Probe:
    """Whether the response cache holds a cell's first response: asked of the cell's own
    adapter (its endpoint, parameters and cache), built once per model; ``None`` for a model
    whose adapter cannot be built here (a dry run needs no SDK) or keeps no cache."""
    adapters: dict[str, Any] = {}

    def probe(cell: Cell, shape: Shape) -> bool | None:
        spec = joined(cell.model, cell.transport)
        if spec not in adapters:
            adapters[spec] = _adapter(spec)
        adapter = adapters[spec]
        if adapter is None or shape.first is None:
            return None
        messages, tools = shape.first
        return bool(adapter.cache.holds(adapter.cache_key(list(messages), list(tools),
                                                          cell.seed)))

    return probe


def _adapter(spec: str) -> Any:
    from limbo.commands.model_check import built

    try:
        adapter = built(spec, False)
    except UsageError:
        return None
    return adapter if getattr(adapter, "cache", None) is not None and hasattr(
        adapter, "cache_key") else None


def pilot_cells(cells: Iterable[Cell], the_plan: Plan, shard: tuple[int, int] | None,
                recorded: set[str], n: int) -> frozenset[str]:
    """The cells a pilot of ``n`` per real model runs: for each, among this shard's cells not
    recorded, those first in the fixed random order (:func:`limbo.run.forecast.rank`) of
    worlds not yet observed, as many as it takes for ``n`` of the model's worlds (or, in a grid
    with fewer, ``n`` episodes) to be recorded."""
    mine = set(the_plan.mine)
    seen: dict[str, list[int]] = {}
    free: dict[str, list[tuple[int, str, int]]] = {}
    for cell in cells:
        if not calls_a_provider(cell.model) or not in_shard(cell.episode_id, shard):
            continue
        if cell.episode_id in recorded:
            seen.setdefault(cell.model, []).append(cell.seed)
        elif cell.episode_id in mine:
            free.setdefault(cell.model, []).append((rank(cell.episode_id), cell.episode_id,
                                                    cell.seed))
    chosen: set[str] = set()
    for model, ranked in free.items():
        chosen.update(_spread(sorted(ranked), seen.get(model, []), n))
    return frozenset(chosen)


def _spread(ranked: list[tuple[int, str, int]], seen: list[int], n: int) -> list[str]:
    """Cells in ``ranked`` order, each of a world not yet observed, until ``n`` worlds are
    (the forecast learns from worlds: :mod:`limbo.run.forecast`); in a grid with fewer, the
    next cells in order until ``n`` episodes are."""
    worlds, picked = set(seen), list[str]()
    for _, episode, world in ranked:
        if len(worlds) >= n:
            return picked
        if world not in worlds:
            worlds.add(world)
            picked.append(episode)
    more = [e for _, e, _ in ranked if e not in picked]
    return picked + more[:max(0, n - len(seen) - len(picked))]


def check_pilot(args: argparse.Namespace) -> None:
    if args.pilot is None:
        return
    if not args.dry_run:
        raise UsageError("--pilot runs a few cells to forecast the rest: give it with "
                         "--dry-run (limbo run ... --dry-run --pilot N)")
    if args.pilot < 1:
        raise UsageError(f"--pilot must be at least 1 cell per model, got {args.pilot}")
