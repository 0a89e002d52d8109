"""The forecast of one pass, model by model and in total (:mod:`limbo.run.forecast` has the
statistics), as the dry run prints it, the run records it in its manifest (``forecast``) and
``limbo status`` sets it beside what was spent (``actual``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from limbo.base.words import duration, plural
from limbo.run.forecast import (
    LEVEL,
    UNOBSERVED_CALL_S,
    Foreseen,
    ModelPlan,
    Observed,
    ratio_total,
    shaped,
    summed,
)
from limbo.run.shapes import Shape
from limbo.sim.cell import Cell

Price = Callable[[str], "dict[str, float] | None"]
Probe = Callable[[Cell, Shape], "bool | None"]
"""Whether the response cache holds a cell's first response (``None``: cannot tell)."""


@dataclass(frozen=True)
class ModelForecast:
    spec: str
    cells: int
    """Cells of this model to run in the pass."""
    observed: int
    """Episodes of this model recorded, the forecast learned from."""
    worlds: int
    """The worlds they fell in (of those whose shape was computed)."""
    cached: int | None
    """Cells to run whose first response the cache holds (estimated from the sample)."""
    usd: Foreseen | None
    """``None``: the model has no known price."""
    calls: Foreseen
    episode_s: Foreseen
    """The episodes' wall seconds, summed."""
    shaped: bool
    """Whether cells were told apart by their shapes (else each counts alike)."""


def forecast_model(plan: ModelPlan, price: dict[str, float] | None, probe: Probe | None
                   ) -> ModelForecast:
    todo, seen = plan.todo.cells(), plan.seen.cells()
    found = shaped(todo + seen)
    use_shapes = all(found[c.episode_id] is not None for c in todo + seen)
    cached = [_cached(probe, c, found[c.episode_id]) for c in todo]

    def x(cell: Cell, metric: str) -> float:
        shape = found[cell.episode_id]
        if not use_shapes or shape is None:
            return 1.0
        return (shape.usd(price) or 0.0) if metric == "usd" else float(shape.calls)

    def sample(metric: str) -> list[tuple[object, float]]:
        return [(c.seed, 0.0 if hit else x(c, metric))
                for c, hit in zip(todo, cached, strict=True)]

    def pairs(metric: str, y: Callable[[Observed], float | None]
              ) -> list[tuple[object, float, float]]:
        got = [(c.seed, x(c, metric), y(plan.observed[c.episode_id])) for c in seen]
        return [(w, a, b) for w, a, b in got if b is not None]

    size = plan.todo.size
    calls = ratio_total(pairs("calls", lambda o: float(o.turns)), sample("calls"), size)
    wall_pairs = pairs("calls", lambda o: o.wall_s)
    wall = ratio_total(wall_pairs, sample("calls"), size)
    if not wall_pairs:
        wall = Foreseen(calls.estimate * UNOBSERVED_CALL_S)
    usd = None if price is None else ratio_total(pairs("usd", lambda o: o.cost),
                                                 sample("usd"), size)
    known = [c for c in cached if c is not None]
    hits = round(size * sum(known) / len(known)) if known and len(known) == len(todo) else None
    return ModelForecast(plan.spec, size, len(plan.observed), len({c.seed for c in seen}), hits,
                         usd, calls, wall, use_shapes)


def _cached(probe: Probe | None, cell: Cell, shape: Shape | None) -> bool | None:
    if probe is None or shape is None or shape.first is None:
        return None
    return probe(cell, shape)


@dataclass(frozen=True)
class PassForecast:
    """The forecast of one pass: every real model's, and their total."""

    models: list[ModelForecast]
    at_once: int

    @property
    def usd(self) -> Foreseen | None:
        parts = [m.usd for m in self.models]
        return None if any(p is None for p in parts) else summed([p for p in parts if p])

    @property
    def calls(self) -> Foreseen:
        return summed([m.calls for m in self.models])

    @property
    def wall_s(self) -> Foreseen:
        """The pass's wall time: its episodes' seconds, run ``at_once`` at a time — in waves,
        so a pass of 5 episodes at 4 at once takes two episodes' time, not 5/4 of one."""
        cells = sum(m.cells for m in self.models)
        waves = -(-cells // max(self.at_once, 1))
        return summed([m.episode_s for m in self.models]).scaled(waves / max(cells, 1))

    @property
    def cached(self) -> int | None:
        counts = [m.cached for m in self.models]
        return None if any(c is None for c in counts) else sum(c or 0 for c in counts)

    def to_json(self) -> dict[str, Any]:
        usd = self.usd
        return {"level": LEVEL, "method": "ratio estimator over cell shapes (docs/runs.md)",
                "at_once": self.at_once, "cells": sum(m.cells for m in self.models),
                "usd": None if usd is None else usd.to_json(),
                "calls": self.calls.to_json(), "wall_s": self.wall_s.to_json(),
                "cached_first": self.cached,
                "models": {m.spec: {"cells": m.cells, "observed": m.observed,
                                    "worlds": m.worlds,
                                    "cached_first": m.cached, "shaped": m.shaped,
                                    "usd": None if m.usd is None else m.usd.to_json(),
                                    "calls": m.calls.to_json(),
                                    "episode_s": m.episode_s.to_json()}
                           for m in self.models}}


def forecast_pass(plans: dict[str, ModelPlan], price: Price, probe: Probe | None,
                  at_once: int) -> PassForecast:
    return PassForecast([forecast_model(p, price(spec), probe)
                         for spec, p in sorted(plans.items()) if p.todo.size], at_once)


# ------------------------------------------------------------------ in words


def money(value: Foreseen | None) -> str:
    if value is None:
        return "cost unknown (no price)"
    return f"${value.estimate:.4g}" + _range(value, lambda v: f"{v:.4g}")


def count(value: Foreseen, word: str) -> str:
    return f"{plural(round(value.estimate), word)}" + _range(value, lambda v: f"{v:,.0f}")


def seconds(value: Foreseen) -> str:
    return duration(value.estimate) + _range(value, duration)


def _range(value: Foreseen, fmt: Callable[[float], str]) -> str:
    if value.low is None or value.high is None:
        return ""
    return f" [{fmt(value.low)}, {fmt(value.high)}]"


GUESS = ("a guess from the cells' shapes alone, no interval: --pilot N runs N cells of each "
         "model first")


def model_line(m: ModelForecast) -> str:
    seen = f"{plural(m.observed, 'episode')} observed in {plural(m.worlds, 'world')}"
    basis = f"from {seen}" if m.calls.low is not None else f"{seen}: {GUESS}"
    cached = ("" if m.cached is None
              else f"; {m.cached:,} {_start(m.cached)} from the response cache")
    return (f"  {m.spec}: {plural(m.cells, 'episode')}: {money(m.usd)}, "
            f"{count(m.calls, 'model call')}, {seconds(m.episode_s)} of episodes ({basis}"
            f"{cached})")


def _start(n: int) -> str:
    """The verb of ``n`` cells starting from the cache: one ``starts``, two ``start``."""
    return "starts" if n == 1 else "start"


def total_line(f: PassForecast) -> str:
    cells = plural(sum(m.cells for m in f.models), "episode")
    cached = ("" if f.cached is None
              else f"; {f.cached:,} of the {cells} {_start(f.cached)} from the cache")
    sure = f.calls.low is not None
    return (f"forecast{f' ({LEVEL:.0%} intervals)' if sure else ''}: {money(f.usd)}, "
            f"{count(f.calls, 'model call')}, {seconds(f.wall_s)} of wall time at "
            f"{plural(f.at_once, 'episode')} at once"
            + ("" if sure else f" ({GUESS})") + cached)
