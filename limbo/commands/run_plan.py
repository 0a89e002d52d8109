"""What a run will cost before it starts: episodes that drive real harness processes or call
real models, how long they should take, and (``--dry-run``) what the models should cost.

A reference-policy episode in the minimal loop takes milliseconds; one driven through a
production harness starts a real CLI process (seconds), and one with a real model makes
several provider calls. A grid that mixes them can run for hours where the user expected
seconds — so before such a run starts, ``limbo run`` says how many of its episodes are of
that kind and about how long they take: each harness's measured median per episode
(:attr:`ProductionHarness.median_wall_s`) plus, for a real model, :data:`EST_TURNS` calls of
:data:`EST_CALL_S` seconds each, divided by the episodes run at once (``--concurrency`` times
``--workers``). That line is rough by design, and says what it assumes; the forecast that
follows it (:mod:`limbo.commands.run_forecast`) is the measured one. ``--dry-run`` prints both,
per harness and per model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from limbo.base.words import duration, plural
from limbo.episode.harness import unavailable
from limbo.run.kinds import calls_a_provider as real_model
from limbo.run.kinds import harness_median
from limbo.sim.cell import Cell
from limbo.sim.transport import joined

EST_TURNS = 6
"""Assumed model calls of one real-model episode, for the plan line (the forecast learns)."""
EST_CALL_S = 3.0
"""Assumed wall seconds of one real model call (a hosted model answering a short tool call)."""


@dataclass
class Work:
    """The cells of a run that drive real harness processes or call real models."""

    cells: int = 0
    harnesses: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    harness_s: float = 0.0
    """Estimated wall seconds of the harness processes, one episode at a time."""
    model_s: float = 0.0
    """Assumed wall seconds of the model calls (:data:`EST_TURNS` × :data:`EST_CALL_S`
    each), one episode at a time: the forecast replaces it when it has one."""
    specs: dict[str, str] = field(default_factory=dict)
    """Each model as the cells name it, with how it is reached (its transport)."""

    def add(self, cell: Cell) -> None:
        median, real = harness_median(cell.harness), real_model(cell.model)
        if median is None and not real:
            return
        self.cells += 1
        if median is not None:
            self.harnesses[cell.harness] += 1
            self.harness_s += median
        if real:
            self.models[cell.model] += 1
            self.model_s += EST_TURNS * EST_CALL_S
            self.specs.setdefault(cell.model, joined(cell.model, cell.transport))


def may_be_real(levels: dict[str, list[str]]) -> bool:
    """Whether a grid with these levels can hold any such cell (else nothing is counted, and
    ``limbo run`` skips a pass over the cells: a second of the paper grid's start). A real
    harness that cannot run here does not count: its cells are dropped as the grid expands."""
    return (any(harness_median(h) is not None and unavailable(h) is None
                for h in levels["harnesses"])
            or any(real_model(m) for m in levels["models"]))


def count(cells: Iterable[Cell]) -> Work:
    work = Work()
    for cell in cells:
        work.add(cell)
    return work


def plan_line(work: Work, total: int, at_once: int, model_s: float | None = None) -> str:
    """The line printed before a run with real processes or real models; ``model_s``: the
    forecast's wall seconds of the model episodes, one at a time, when there is one."""
    parts = []
    if work.harnesses:
        each = ", ".join(f"{h} {n:,} × ~{harness_median(h):g} s"
                         for h, n in sorted(work.harnesses.items()))
        n = sum(work.harnesses.values())
        parts.append(f"{n:,} {'drives' if n == 1 else 'drive'} real harness processes ({each}; "
                     f"measured medians)")
    if work.models:
        n = sum(work.models.values())
        how = ("as forecast" if model_s is not None else
               f"~{EST_TURNS} calls each, ~{EST_CALL_S:g} s a call assumed")
        parts.append(f"{n:,} {'calls' if n == 1 else 'call'} real models ({how})")
    seconds = work.harness_s + (work.model_s if model_s is None else model_s)
    return (f"plan: of the {plural(total, 'episode')} to run, " + " and ".join(parts)
            + f": about {duration(seconds / at_once)} of wall time at "
            f"{plural(at_once, 'episode')} at once (--concurrency × --workers)")


def harness_lines(work: Work) -> list[str]:
    """``--dry-run``: one line per real harness."""
    return [f"  harness {h}: {n:,} episodes × ~{harness_median(h):g} s (measured median of the "
            f"pinned version) ≈ {duration(n * (harness_median(h) or 0.0))} one at a time"
            for h, n in sorted(work.harnesses.items())]


def dry_run(grid: Any, shard: tuple[int, int] | None, args: Any, console: Any, out: Any,
            kept: set[str]) -> None:
    """Count the cells as they stream by (nothing is kept but counts and bounded samples) and
    print, per model and per real harness, what running them would take: for real models, the
    forecast of the pass (:mod:`limbo.commands.run_forecast`), from what ``out`` holds."""
    from limbo.commands.run_forecast import forecast_of
    from limbo.experiments.source import CellSource
    from limbo.run.outlook import model_line, total_line
    from limbo.run.plan import in_shard

    source = CellSource(grid)
    per_model: Counter[str] = Counter()
    work, todo = Work(), []
    for cell in source:
        if in_shard(cell.episode_id, shard) and cell.episode_id not in kept:
            per_model[cell.model] += 1
            work.add(cell)
            todo.append(cell.episode_id)
    for reason, n in sorted(source.dropped.items()):
        _say(console, f"dropped {plural(n, 'cell')}: {reason}")
    _say(console, f"grid {grid.name}: {plural(len(todo), 'episode')} to run"
         + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
    at_once = args.concurrency * args.workers
    forecast = forecast_of(source, todo, out, kept, at_once) if work.models else None
    by_model = {m.spec: m for m in forecast.models} if forecast else {}
    for model, n in per_model.items():
        if model in by_model:
            _say(console, model_line(by_model[model]) + _needs(work.specs[model]))
        else:
            _say(console, f"  {model}: {plural(n, 'episode')}, no model calls (runs offline)")
    for line in harness_lines(work):
        _say(console, line)
    if forecast is not None:
        _say(console, total_line(forecast))
    if work.cells:
        _say(console, plan_line(work, len(todo), at_once, model_seconds(forecast)))


def model_seconds(forecast: Any) -> float | None:
    """The forecast's wall seconds of the model episodes, one at a time, if it learned them."""
    if forecast is None or forecast.calls.low is None:
        return None
    return float(forecast.wall_s.estimate * forecast.at_once)


def _needs(spec: str) -> str:
    """What ``spec`` still needs to run here (its SDK, its key): a dry run needs neither."""
    from limbo.base.errors import UsageError
    from limbo.commands.model_check import built

    try:
        built(spec, False)
    except UsageError as exc:
        return f" (to run it: {exc})"
    return ""


def _say(console: Any, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)
