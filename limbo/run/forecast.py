"""What a pass of a real-model grid will cost — dollars, model calls, wall time — with a 95 %
prediction interval, from what is known: prices, each cell's shape (:mod:`limbo.run.shapes`),
the response cache, and the episodes of each model already recorded (a pilot's, or an earlier
pass's).

The estimator is a ratio estimator, the survey statistician's tool for a total known through
a cheap auxiliary measure. For each model, each cell *i* has a shape *x_i* (for dollars: its
reference conversation's tokens at the model's price; for calls and wall time: its reference
calls), known for every cell without spending anything; the episodes observed give pairs
(*x_j*, *y_j*) with *y_j* the real cost, calls or wall seconds. The model is *y = r·x + e*: a
model that talks twice as much as the yardstick costs about twice as much in every cell. The
deviations *e* are taken to be shared by the cells of one world (one task instance and focal
write, whatever its fault or condition: the same task text, which a model may find wordy or
terse), in proportion to their size — the conservative end, since a world's cells may also
vary on their own. So the world is the unit: with *X_w*, *Y_w* the sums over a world's
observed cells and *k* the worlds observed,

- r̂ = ΣY / ΣX, and the pass's total is T̂ = r̂ · X, X the sum of the shapes of the cells to run
  (from a sample of at most :data:`SAMPLE` cells per model when there are more, scaled up);
- τ̂² = Σ_w ((Y_w − r̂X_w) / X_w)² / (k − 1), a world's relative deviation, at least
  (:data:`FLOOR_CV` · r̂)²: a pilot of three deterministic episodes that agreed exactly would
  otherwise claim an interval of width zero;
- the prediction variance is τ̂²·Σ_w X'_w² over the worlds of the cells to run (their own
  deviations) + X²·τ̂²·ΣX_w²/(ΣX_w)² (the error in r̂) + r̂²·Var(X̂) (the sample of shapes);
- the interval is T̂ ± t(k − 1) · √Var, Student's t at 97.5 %, cut at 0.

A cell whose first response the cache already holds is counted as free (x = 0): a re-run of
recorded cells replays its answers. Wall time is the sum over episodes, run in waves of the
episodes run at once (:class:`limbo.run.outlook.PassForecast`) — it assumes the provider keeps
up with them, and leaves out the run's own start (reading the directory, the preflight). With fewer than two
worlds of a model observed there is no interval: the estimate is then the yardstick's own
(r = 1) and says so; a pilot (``limbo run --dry-run --pilot N``) runs N cells of each model
for real, recorded like any other, to learn r.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from limbo.base.hashing import digest
from limbo.log.rated import ERRORED
from limbo.run.shapes import Shape, shapes
from limbo.sim.cell import Cell

LEVEL = 0.95
FLOOR_CV = 0.10
"""A world's relative deviation is taken to be at least 10 %: a few episodes that happened to
agree exactly do not make an interval of width zero."""
SAMPLE = 400
"""Cells per model whose shape is computed, of those to run and of those observed."""
UNOBSERVED_CALL_S = 3.0
"""Wall seconds a call is assumed to take when no episode of the model was observed."""
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042,
         40: 2.021, 60: 2.000, 120: 1.980}
"""Student's t, 97.5 % points (the standard table); between rows, linear in 1/df."""


def t975(df: int) -> float:
    """Student's t 97.5 % point for ``df`` degrees of freedom (df >= 1)."""
    if df in _T975:
        return _T975[df]
    rows = sorted(_T975)
    if df > rows[-1]:
        low, high, t_low, t_high = rows[-1], math.inf, _T975[rows[-1]], 1.95996
    else:
        high = next(r for r in rows if r > df)
        low = max(r for r in rows if r < df)
        t_low, t_high = _T975[low], _T975[high]
    share = (1 / low - 1 / df) / (1 / low - (0 if high == math.inf else 1 / high))
    return t_low + share * (t_high - t_low)


@dataclass(frozen=True)
class Foreseen:
    """A forecast total: the estimate, and its interval when one could be had."""

    estimate: float
    low: float | None = None
    high: float | None = None
    var: float | None = None
    df: int | None = None

    def holds(self, value: float) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= value <= self.high

    def scaled(self, factor: float) -> Foreseen:
        return Foreseen(self.estimate * factor, _mul(self.low, factor), _mul(self.high, factor),
                        None if self.var is None else self.var * factor ** 2, self.df)

    def to_json(self) -> dict[str, Any]:
        return {"estimate": _round(self.estimate), "low": _round(self.low),
                "high": _round(self.high)}


def _mul(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def ratio_total(pairs: list[tuple[object, float, float]], sample: list[tuple[object, float]],
                size: int) -> Foreseen:
    """The total of ``y`` over ``size`` cells whose ``(world, x)`` ``sample`` is a random
    sample (all of them when ``len(sample) == size``), from observed ``(world, x, y)``
    ``pairs``. Cells of one world are taken to share their deviation from ``r·x`` (see the
    module docstring)."""
    scale = size / len(sample) if sample else 0.0
    total_x = scale * sum(x for _, x in sample)
    seen = _worlds((w, x, y) for w, x, y in pairs)
    sx = sum(x for x, _ in seen.values())
    if not seen or sx <= 0:
        return Foreseen(total_x)  # nothing observed: the yardstick's own (r = 1)
    r = sum(y for _, y in seen.values()) / sx
    estimate = r * total_x
    if len(seen) < 2:
        return Foreseen(estimate)
    spread = max(sum(((y - r * x) / x) ** 2 for x, y in seen.values() if x > 0)
                 / (len(seen) - 1), (FLOOR_CV * r) ** 2)
    rest = sum((scale * x) ** 2 for x, _ in _worlds((w, x, 0.0) for w, x in sample).values())
    var = (spread * rest + total_x ** 2 * spread * sum(x * x for x, _ in seen.values()) / sx ** 2
           + r ** 2 * _sample_var([x for _, x in sample], size))
    return _interval(estimate, var, len(seen) - 1)


def _worlds(points: Iterable[tuple[object, float, float]]) -> dict[object, tuple[float, float]]:
    """``(x, y)`` summed by world."""
    out: dict[object, tuple[float, float]] = {}
    for world, x, y in points:
        had = out.get(world, (0.0, 0.0))
        out[world] = (had[0] + x, had[1] + y)
    return out


def _sample_var(sample: list[float], size: int) -> float:
    """Var of the scaled-up sum of a simple random sample of ``size`` cells' shapes."""
    s = len(sample)
    if s < 2 or s >= size:
        return 0.0
    mean = sum(sample) / s
    spread = sum((v - mean) ** 2 for v in sample) / (s - 1)
    return size ** 2 * (1 - s / size) * spread / s


def _interval(estimate: float, var: float, df: int) -> Foreseen:
    half = t975(df) * math.sqrt(max(var, 0.0))
    return Foreseen(estimate, max(0.0, estimate - half), estimate + half, var, df)


def summed(parts: list[Foreseen]) -> Foreseen:
    """The sum of independent totals; an interval only when every part has one (Student's t
    at the fewest degrees of freedom among them: conservative)."""
    estimate = sum(p.estimate for p in parts)
    if not parts or any(p.var is None or p.df is None for p in parts):
        return Foreseen(estimate)
    return _interval(estimate, sum(p.var or 0.0 for p in parts),
                     min(p.df or 1 for p in parts))


@dataclass(frozen=True)
class Observed:
    """What a recorded episode of a real model cost."""

    cost: float | None
    turns: int
    wall_s: float | None
    """Its wall seconds when the provider answered it all (a cached turn takes none)."""

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Observed:
        outcome, runtime = record["outcome"], record.get("runtime") or {}
        calls = runtime.get("model_calls") or {}
        cost = outcome.get("cost_usd")
        wall = runtime.get("wall_s") if not calls.get("cached") else None
        return cls(float(cost) if isinstance(cost, int | float) else None,
                   int(outcome.get("model_turns") or 0),
                   float(wall) if isinstance(wall, int | float) else None)


@dataclass
class _Sample:
    """At most :data:`SAMPLE` cells, the same ones whatever the order they come in: those
    whose id digests lowest (a uniform random sample, fixed by the ids)."""

    heap: list[tuple[int, str, Cell]] = field(default_factory=list)
    size: int = 0

    def add(self, cell: Cell) -> None:
        self.size += 1
        item = (-rank(cell.episode_id), cell.episode_id, cell)
        if len(self.heap) < SAMPLE:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:
            heapq.heapreplace(self.heap, item)

    def cells(self) -> list[Cell]:
        return [c for _, _, c in sorted(self.heap, reverse=True)]


def rank(episode_id: str) -> int:
    """Where an episode falls in the fixed random order pilots and samples draw from."""
    return int(digest(episode_id, 12), 16)


@dataclass
class ModelPlan:
    """One model's cells: those to run (sampled) and those observed, with their shapes."""

    spec: str
    todo: _Sample = field(default_factory=_Sample)
    seen: _Sample = field(default_factory=_Sample)
    observed: dict[str, Observed] = field(default_factory=dict)


def gather(cells: Iterable[Cell], todo: set[str], observed: Mapping[str, Observed],
           real: Callable[[str], bool]) -> dict[str, ModelPlan]:
    """Each real model's cells to run (``todo``) and observed, in one pass over ``cells``."""
    plans: dict[str, ModelPlan] = {}
    for cell in cells:
        if not real(cell.model):
            continue
        plan = plans.get(cell.model) or plans.setdefault(cell.model, ModelPlan(cell.model))
        if cell.episode_id in observed:
            plan.seen.add(cell)
            plan.observed[cell.episode_id] = observed[cell.episode_id]
        if cell.episode_id in todo:  # both, for an errored cell run again
            plan.todo.add(cell)
    return plans


def observed_records(records: Iterator[Mapping[str, Any]],
                     real: Callable[[str], bool]) -> dict[str, Observed]:
    """What each recorded episode of a real model cost, by episode id: those that ended
    without an error (an episode the provider or the sandbox broke, or the wall clock cut,
    says little of what a cell costs)."""
    return {r["episode_id"]: Observed.of(r) for r in records
            if real(r["cell"]["model"]) and r["outcome"]["termination"] not in ERRORED}


def shaped(cells: list[Cell]) -> dict[str, Shape | None]:
    return dict(zip((c.episode_id for c in cells), shapes(cells), strict=True))
