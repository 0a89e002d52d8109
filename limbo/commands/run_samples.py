"""How ``limbo run`` samples beyond one episode per cell, and what it says about it at the end:
``--repeats K`` (pass^k and consistency, :mod:`limbo.log.replicates`) and ``--precision``
(sampling worlds until each arm is precise enough, :mod:`limbo.run.precision`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from limbo.base.errors import UsageError

if TYPE_CHECKING:  # `limbo status` reads this module's unsampled() without the grid machinery
    from limbo.experiments.grid import Grid
    from limbo.sim.cell import Cell


def add_flags(p: argparse.ArgumentParser) -> None:
    """``--precision`` (``--repeats`` sits with the grid's other counts)."""
    p.add_argument("--precision", metavar="METRIC:HALFWIDTH[@FACTORS]",
                   help="sample worlds in a fixed seeded order and stop each arm once a 95%% "
                        "confidence sequence for METRIC (dup, eos, ts, overclaim) is within "
                        "±HALFWIDTH, e.g. dup:0.05; arms: the levels of FACTORS (default: every "
                        "model, harness, condition, contract and fault level the grid varies)")


def schedule(args: argparse.Namespace, grid: Grid, cells: Iterable[Cell]) -> Any:
    """The ``--precision`` schedule of ``grid``'s cells, or ``None`` without the flag."""
    if args.precision is None:
        return None
    from limbo.run.precision import Precision, parse_spec

    return Precision.plan(parse_spec(args.precision), cells, grid.seed,
                          args.concurrency * args.workers)


def check(args: argparse.Namespace) -> None:
    """The flag's text, before anything runs (a typo is one line, nothing written)."""
    if args.precision is not None:
        from limbo.run.precision import parse_spec

        parse_spec(args.precision)
        if args.shard:
            raise UsageError("--precision decides after each world from every arm's results, "
                             "which one shard does not see: drop --shard")


def end_lines(grid: Grid, out: Path, facts: dict[str, Any] | None) -> list[str]:
    """What the end of the run adds to the summary: the precision of each arm, and pass^k and
    consistency when cells were repeated."""
    lines = precision_lines(facts) if facts is not None else []
    if grid.repeats > 1:
        from limbo.log.replicates import Replicates, cells_and_outcomes
        from limbo.log.store import record_files

        lines += Replicates.of(cells_and_outcomes(record_files(out))).lines()
    return lines


def precision_lines(facts: dict[str, Any]) -> list[str]:
    """Each arm's estimate, interval and where it stopped; the episodes against the grid's."""
    lines = [f"precision {facts['spec']}: {facts['rule']}; estimand: {facts['estimand']}"]
    for arm in facts["arms"]:
        name = ", ".join(f"{k}={v}" for k, v in arm["arm"].items()) or "all cells"
        value = ("—" if arm["estimate"] is None else
                 f"{100 * arm['estimate']:.1f}% [{100 * arm['lo']:.1f}, {100 * arm['hi']:.1f}]")
        lines.append(f"  {name}: {facts['metric']} {value} after {arm['worlds']} of "
                     f"{arm['of_worlds']} worlds ({arm['episodes']} of {arm['of_episodes']} "
                     f"episodes): {_status(arm, facts['halfwidth'])}")
    run, grid = facts["episodes_run"], facts["grid_episodes"]
    saved = 100 * (1 - run / grid) if grid else math.nan
    lines.append(f"  episodes: {run:,} recorded of the full grid's {grid:,} ({saved:.0f}% fewer)"
                 + (f"; stopped by {facts['stopped']}, the same command resumes"
                    if facts["stopped"] else ""))
    return lines


def _status(arm: dict[str, Any], half: float) -> str:
    return {"reached": f"reached ±{half:g}",
            "exhausted": f"worlds ran out before ±{half:g}",
            "stopped": "stopped before its target"}.get(arm["status"], str(arm["status"]))


def unsampled(manifests: Iterable[dict[str, Any]], total: int | None,
              done: int) -> tuple[str | None, int]:
    """For ``limbo status``: the note of a ``--precision`` run whose every arm stopped by its
    rule, and the cells of the grid it did not need (0 for any other run)."""
    for manifest in manifests:
        facts = manifest.get("precision")
        if isinstance(facts, dict) and isinstance(facts.get("note"), str):
            finished = all(a.get("status") in ("reached", "exhausted")
                           for a in facts.get("arms") or [])
            left = max(0, (total or 0) - done) if finished and not facts.get("stopped") else 0
            return facts["note"], left
    return None, 0
