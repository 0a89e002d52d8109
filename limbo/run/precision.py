"""``limbo run --precision METRIC:HALFWIDTH[@FACTOR,...]``: sample worlds until each arm's
estimate is as precise as asked, then stop that arm.

An *arm* is one combination of the levels of the arm factors (by default every factor among
model, harness, condition, contract and fault that takes more than one level in the grid); a
*world* is a task template and instance. The estimand of an arm is the mean over worlds of each
world's rate of the metric over the arm's rated episodes there (equal weight per world), and
each world's rate is one observation in [0, 1]: worlds are the independent unit, however many
episodes (faults, focal writes, replicates) an arm has in each.

Worlds are taken in one deterministic order, the order of a digest of (grid seed, template,
instance) — a seeded shuffle, the same for every arm, every run and every resume. After each
world an arm's confidence sequence (:mod:`limbo.base.confseq`, valid under looking after every
world) is narrowed, and the arm stops at the first world where its half-width is at most the
target. An arm whose worlds run out first stops there (``exhausted``); a budget or ``--limit``
stops all arms where they are (``stopped``), and the same command resumes the same sequence.

Worlds run in rounds of a few per arm (as many as the episodes run at once can take), the cells
of a round on the run's executor like any other pass: every record is the fixed grid's record
of that cell. The stop is decided world by world, so where an arm stops and what it estimates
do not depend on the round size; only the episodes of the stopping round beyond the stop run
without being used (they are recorded, and counted in ``episodes_run``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from limbo.base.confseq import RULE, BettingCS
from limbo.base.errors import UsageError
from limbo.base.hashing import digest
from limbo.log.rated import rated
from limbo.sim.cell import Cell

METRICS = {"dup": "duplicate", "eos": "exactly_once", "ts": "task_success",
           "overclaim": "overclaim"}
"""The metrics ``--precision`` takes, as the outcome field each rates."""
ARM_FACTORS = ("model", "harness", "condition", "contract", "fault", "service", "focal_write")
"""Cell fields that may define arms (not the world's template and instance, nor the replicate)."""
DEFAULT_FACTORS = ("model", "harness", "condition", "contract", "fault")
ALPHA = 0.05
World = tuple[str, int]


@dataclass(frozen=True)
class Spec:
    """What ``--precision`` asked for."""

    metric: str
    halfwidth: float
    factors: tuple[str, ...] | None
    """``None``: the default factors that vary in the grid."""

    @property
    def outcome(self) -> str:
        return METRICS[self.metric]

    def text(self) -> str:
        arms = f"@{','.join(self.factors)}" if self.factors else ""
        return f"{self.metric}:{self.halfwidth:g}{arms}"


def parse_spec(text: str) -> Spec:
    """``dup:0.05`` or ``eos:0.03@model,condition``; one :class:`UsageError` line otherwise."""
    body, _, arms = text.partition("@")
    metric, _, width = body.partition(":")
    if metric not in METRICS:
        raise UsageError(f"--precision {text!r}: the metric must be one of {', '.join(METRICS)} "
                         f"(e.g. dup:0.05)")
    try:
        half = float(width)
    except ValueError:
        raise UsageError(f"--precision {text!r}: the half-width after ':' must be a number, "
                         f"e.g. dup:0.05") from None
    if not 0.001 <= half <= 0.5:
        raise UsageError(f"--precision {text!r}: the half-width must be between 0.001 and 0.5 "
                         f"(a fraction: 0.05 is ±5 points)")
    factors = tuple(dict.fromkeys(f.strip() for f in arms.split(","))) if arms else None
    bad = [f for f in factors or () if f not in ARM_FACTORS]
    if bad:
        raise UsageError(f"--precision {text!r}: {bad[0]!r} cannot define arms; choose from "
                         f"{', '.join(ARM_FACTORS)}")
    return Spec(metric, half, factors)


def world_order(seed: int, worlds: Iterable[World]) -> list[World]:
    """The worlds in the run's one sampling order: a seeded shuffle by digest."""
    return sorted(set(worlds), key=lambda w: (digest([seed, "precision", w[0], w[1]]), w))


@dataclass
class Arm:
    """One arm's worlds in sampling order, its cells in each, and its sequence so far."""

    key: tuple[tuple[str, Any], ...]
    worlds: list[World]
    cells: dict[World, list[Cell]]
    cs: BettingCS
    at: int = 0
    """Worlds of :attr:`worlds` taken into account so far."""
    used: int = 0
    """Worlds up to and including the stop (or all taken into account, if not stopped)."""
    status: str = "running"

    def cells_from(self, start: int, count: int) -> Iterator[Cell]:
        for world in self.worlds[start:start + count]:
            yield from self.cells[world]

    def episodes(self, worlds: int) -> int:
        return sum(len(self.cells[w]) for w in self.worlds[:worlds])

    def facts(self, run: int) -> dict[str, Any]:
        cs = self.cs
        return {"arm": dict(self.key), "status": self.status, "worlds": self.used,
                "observations": cs.n, "of_worlds": len(self.worlds),
                "episodes": self.episodes(self.used), "episodes_run": run,
                "of_episodes": self.episodes(len(self.worlds)),
                "estimate": None if math.isnan(cs.mean) else round(cs.mean, 6),
                "lo": round(cs.lo, 6), "hi": round(cs.hi, 6)}


@dataclass
class Precision:
    """The schedule of a ``--precision`` run (:func:`limbo.run.runner.run_cells`'s
    ``schedule``): which cells each round runs, and where each arm stopped."""

    spec: Spec
    arms: list[Arm]
    per_round: int
    results: dict[str, float | None] = field(default_factory=dict)
    """Episode id → the metric (0/1) of a rated episode, None for an unrated one."""
    ran: set[str] = field(default_factory=set)
    stopped: str | None = None

    @classmethod
    def plan(cls, spec: Spec, cells: Iterable[Cell], seed: int, at_once: int) -> Precision:
        """Group the grid's cells into arms and worlds (kept in memory for the run)."""
        cells = list(cells)
        factors = spec.factors or tuple(
            f for f in DEFAULT_FACTORS if len({getattr(c, f) for c in cells}) > 1)
        spec = Spec(spec.metric, spec.halfwidth, factors)
        grouped: dict[tuple[tuple[str, Any], ...], dict[World, list[Cell]]] = {}
        for cell in cells:
            key = tuple((f, str(getattr(cell, f))) for f in factors)
            grouped.setdefault(key, {}).setdefault((cell.template, cell.instance), []).append(cell)
        arms = [Arm(key, world_order(seed, by_world), by_world,
                    BettingCS(ALPHA, target=spec.halfwidth))
                for key, by_world in sorted(grouped.items())]
        per_world = sum(len(c) for a in arms for c in a.cells.values()) / max(
            1, sum(len(a.worlds) for a in arms))
        return cls(spec, arms, max(1, int(at_once // max(1.0, per_world * len(arms)))))

    def ids(self) -> set[str]:
        return {c.episode_id for a in self.arms for cs in a.cells.values() for c in cs}

    def read(self, files: Iterable[Path], wanted: set[str]) -> None:
        """Take the results of the cells in ``wanted`` recorded in ``files`` (a resumed run)."""
        from limbo.log.reader import Skip, lines, parts

        for path in files:
            for line in lines(path):
                found = parts(line.raw)
                if not isinstance(found, Skip) and found[1] in wanted:
                    self._take(found[1], found[3])

    def observe(self, line: bytes) -> None:
        """One record as it is written (the runner's tally calls this)."""
        from limbo.log.reader import Skip, parts

        found = parts(line)
        if not isinstance(found, Skip):
            self._take(found[1], found[3])
            self.ran.add(found[1])

    def _take(self, episode_id: str, outcome: dict[str, Any]) -> None:
        ok = rated(outcome["fault_fired"], outcome["termination"])
        self.results[episode_id] = float(outcome[self.spec.outcome]) if ok else None

    def drive(self, run_round: Callable[[list[Cell]], None], limit: int | None) -> None:
        """Run rounds until every arm has stopped, the budget refuses, or ``limit`` cells ran."""
        while True:
            self._advance()
            batch = [c for a in self.arms if a.status == "running"
                     for c in a.cells_from(a.at, self.per_round)
                     if c.episode_id not in self.results]
            if not batch:
                return
            if limit is not None and len(self.ran) + len(batch) > limit:
                batch = batch[:max(0, limit - len(self.ran))]
                self.stopped = f"--limit {limit}"
            if batch:
                run_round(batch)
            if self.stopped or any(c.episode_id not in self.results for c in batch):
                self.stopped = self.stopped or "the budget (--max-cost) refused the next episode"
                self._advance()
                for arm in self.arms:
                    arm.status = "stopped" if arm.status == "running" else arm.status
                return

    def _advance(self) -> None:
        """Take every arm's worlds whose cells all have results, in order, stopping arms."""
        for arm in self.arms:
            while arm.status == "running" and arm.at < len(arm.worlds):
                cells = arm.cells[arm.worlds[arm.at]]
                if any(c.episode_id not in self.results for c in cells):
                    break
                values = [v for v in (self.results[c.episode_id] for c in cells) if v is not None]
                arm.at += 1
                arm.used = arm.at
                if values:
                    arm.cs.update(sum(values) / len(values))
                    if arm.cs.width <= 2 * self.spec.halfwidth:
                        arm.status = "reached"
            if arm.status == "running" and arm.at == len(arm.worlds):
                arm.status = "exhausted"

    def unfinished(self) -> int:
        """Cells of arms still running (a budget or limit stopped them): an upper bound on what
        a resume may run."""
        return sum(len(c) for a in self.arms if a.status == "running"
                   for w in a.worlds[a.at:] for c in [a.cells[w]])

    def facts(self) -> dict[str, Any]:
        """The manifest's ``precision``: the rule, its parameters and where each arm stopped."""
        arms = [a.facts(sum(1 for c in a.cells_from(0, len(a.worlds)) if c.episode_id in
                            self.results)) for a in self.arms]
        return {"precision": {
            "spec": self.spec.text(), "metric": self.spec.metric, "outcome": self.spec.outcome,
            "halfwidth": self.spec.halfwidth, "arms_by": list(self.spec.factors or ()),
            "alpha": ALPHA, "rule": f"{RULE}; an arm stops at the first world where the "
                                    f"half-width is ≤ {self.spec.halfwidth:g}",
            "bets": f"aimed at half-width {self.spec.halfwidth:g}",
            "estimand": "mean over worlds (template, instance) of each world's rate over the "
                        "arm's rated episodes, every world weighted equally",
            "order": "worlds by digest of (grid seed, template, instance)",
            "worlds_per_round": self.per_round, "stopped": self.stopped, "arms": arms,
            "episodes_run": sum(a["episodes_run"] for a in arms),
            "grid_episodes": sum(a["of_episodes"] for a in arms), "note": note(self.spec, arms)}}


def note(spec: Spec, arms: list[dict[str, Any]]) -> str:
    """One line for every table's provenance: the rule and where the arms stopped."""
    worlds = sorted(a["worlds"] for a in arms)
    span = f"{worlds[0]}" if worlds[0] == worlds[-1] else f"{worlds[0]}–{worlds[-1]}"
    reached = sum(a["status"] == "reached" for a in arms)
    return (f"sampled until precise (--precision {spec.text()}): each arm stopped by a 95% "
            f"betting confidence sequence over worlds at {span} worlds per arm; {reached} of "
            f"{len(arms)} arms reached ±{spec.halfwidth:g}")
