"""What a run will cost before it starts: episodes that drive real harness processes or call
real models, how long they should take, and (``--dry-run``) what the models should cost.

A reference-policy episode in the minimal loop takes milliseconds; one driven through a
production harness starts a real CLI process (seconds), and one with a real model makes
several provider calls. A grid that mixes them can run for hours where the user expected
seconds — so before such a run starts, ``limbo run`` says how many of its episodes are of
that kind and about how long they take: each harness's measured median per episode
(:attr:`ProductionHarness.median_wall_s`) plus, for a real model, :data:`EST_TURNS` calls of
:data:`EST_CALL_S` seconds each, divided by the episodes run at once (``--concurrency`` times
``--workers``). ``--dry-run`` prints the same per harness and per model, with a cost estimate.
The numbers are rough by design, and say what they assume.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from limbo.base.words import plural
from limbo.sim.cell import Cell

# Rough sizes of one model call in an episode, for the estimates only: the tool definitions
# and instructions dominate the input; replies are short tool calls.
EST_TURNS, EST_INPUT_TOKENS, EST_OUTPUT_TOKENS = 6, 3000, 150
EST_CALL_S = 3.0
"""Assumed wall seconds of one real model call (a hosted model answering a short tool call)."""


@functools.cache
def harness_median(name: str) -> float | None:
    """The measured median seconds per episode of harness ``name`` when it runs a real
    process; ``None`` for a harness that runs in this process (the minimal loop)."""
    from limbo.base.registry import lookup

    value = getattr(lookup("harness", name), "median_wall_s", None)
    return float(value) if isinstance(value, int | float) else None


@functools.cache
def real_model(spec: str) -> bool:
    """Whether ``spec``'s adapter calls a model (not a reference policy, script or replay)."""
    from limbo.base.registry import lookup
    from limbo.episode.models import parse_model

    return not getattr(lookup("model", parse_model(spec)[0]), "offline", False)


@dataclass
class Work:
    """The cells of a run that drive real harness processes or call real models."""

    cells: int = 0
    harnesses: Counter[str] = field(default_factory=Counter)
    models: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    """Estimated wall seconds, one episode at a time."""

    def add(self, cell: Cell) -> None:
        median, real = harness_median(cell.harness), real_model(cell.model)
        if median is None and not real:
            return
        self.cells += 1
        if median is not None:
            self.harnesses[cell.harness] += 1
        if real:
            self.models[cell.model] += 1
        self.seconds += (median or 0.0) + (EST_TURNS * EST_CALL_S if real else 0.0)


def may_be_real(levels: dict[str, list[str]]) -> bool:
    """Whether a grid with these levels can hold any such cell (else nothing is counted)."""
    return (any(harness_median(h) is not None for h in levels["harnesses"])
            or any(real_model(m) for m in levels["models"]))


def count(cells: Iterable[Cell]) -> Work:
    work = Work()
    for cell in cells:
        work.add(cell)
    return work


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plan_line(work: Work, total: int, at_once: int) -> str:
    """The line printed before a run with real processes or real models."""
    parts = []
    if work.harnesses:
        each = ", ".join(f"{h} {n:,} × ~{harness_median(h):g} s"
                         for h, n in sorted(work.harnesses.items()))
        n = sum(work.harnesses.values())
        parts.append(f"{n:,} {'drives' if n == 1 else 'drive'} real harness processes ({each}; "
                     f"measured medians)")
    if work.models:
        n = sum(work.models.values())
        parts.append(f"{n:,} {'calls' if n == 1 else 'call'} real models (~{EST_TURNS} calls "
                     f"each, ~{EST_CALL_S:g} s a call assumed)")
    return (f"plan: of the {plural(total, 'episode')} to run, " + " and ".join(parts)
            + f": about {duration(work.seconds / at_once)} of wall time at "
            f"{plural(at_once, 'episode')} at once (--concurrency × --workers)")


def harness_lines(work: Work) -> list[str]:
    """``--dry-run``: one line per real harness."""
    return [f"  harness {h}: {n:,} episodes × ~{harness_median(h):g} s (measured median of the "
            f"pinned version) ≈ {duration(n * (harness_median(h) or 0.0))} one at a time"
            for h, n in sorted(work.harnesses.items())]


def estimate_usd(cls: Any, spec: str) -> float | None:
    """Estimated USD per episode of ``spec`` (adapter class ``cls``); ``None``: price unknown."""
    from limbo.commands.model_check import price
    from limbo.episode.models import parse_model

    _, name, params = parse_model(spec)
    found = price(cls, spec, name, params)
    if found is None:
        return None
    per_call = EST_INPUT_TOKENS * found["input"] + EST_OUTPUT_TOKENS * found["output"]
    return EST_TURNS * per_call / 1e6


def dry_run(grid: Any, shard: tuple[int, int] | None, args: Any, console: Any) -> None:
    """Count the cells as they stream by (nothing is kept but counts) and print, per model
    and per real harness, what running them would take."""
    from limbo.experiments.grid import CellSource
    from limbo.run.plan import in_shard

    source = CellSource(grid)
    per_model: Counter[str] = Counter()
    work = Work()
    for cell in source:
        if in_shard(cell.episode_id, shard):
            per_model[cell.model] += 1
            work.add(cell)
    for reason, n in sorted(source.dropped.items()):
        _say(console, f"dropped {n} cells: {reason}")
    total = sum(per_model.values())
    _say(console, f"grid {grid.name}: {total} episodes"
         + (f" (shard {shard[0]}/{shard[1]})" if shard else ""))
    for model, n in per_model.items():
        _say(console, f"  {model}: {n} episodes, {_model_note(model, n)}")
    for line in harness_lines(work):
        _say(console, line)
    _say(console, f"expected model calls: ~{sum(work.models.values()) * EST_TURNS} (about "
         f"{EST_TURNS} per real-model episode)")
    if work.cells:
        _say(console, plan_line(work, total, args.concurrency * args.workers))


def _model_note(spec: str, n: int) -> str:
    """Calls and cost of ``n`` episodes of ``spec``, and what it still needs to run here (its
    SDK, its key): a dry run needs neither."""
    from limbo.base.errors import UsageError
    from limbo.base.registry import lookup
    from limbo.commands.model_check import built
    from limbo.episode.models import parse_model

    if not real_model(spec):
        return "no model calls (runs offline)"
    usd = estimate_usd(lookup("model", parse_model(spec)[0]), spec)
    note = (f"expected model calls ~{n * EST_TURNS}, "
            + ("price unknown" if usd is None else f"~${n * usd:.2f}"))
    try:
        built(spec, False)
    except UsageError as exc:
        note += f" (to run it: {exc})"
    return note


def _say(console: Any, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)
