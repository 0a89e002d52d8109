"""``limbo run``: expand grids, check everything a user could get wrong, run, summarise.

All checks happen before the run directory is touched, so bad input writes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from limbo import activity
from limbo.commands import check
from limbo.commands.common import (
    add_plugin_flag,
    add_provider_flags,
    apply_providers,
    console,
    load_plugins,
    with_params,
)
from limbo.config import EPISODE_TIMEOUT_S
from limbo.errors import UsageError
from limbo.executor import freeze_heap
from limbo.experiments.design import check_comparisons, design
from limbo.experiments.grid import (
    FACTOR_FIELDS,
    CellSource,
    Grid,
    check_size,
    load_grid,
    resolved,
    validated,
)
from limbo.paths import check_dir
from limbo.plan import in_shard, plan
from limbo.provenance import provenance
from limbo.providers.limiter import progress_note
from limbo.providers.secrets import scrub
from limbo.runner import EXECUTORS, RunOptions, run_cells
from limbo.store import scan
from limbo.summary import Summary, render

if TYPE_CHECKING:
    from limbo.adapter import ModelAdapter

PROGRESS_EVERY_S = 5.0
BAR_EVERY_S = 0.1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo run`` on the CLI's subparsers."""
    p = sub.add_parser("run", help="expand and run grids (default: the `default` grid)")
    p.add_argument("grids", nargs="*", default=["default"], metavar="GRID",
                   help="built-in grid names or TOML files (default: default)")
    for flag, field in FACTOR_FIELDS.items():
        p.add_argument(f"--{flag}", action="append", metavar=flag.upper(),
                       help=f"replace the grid's {field} (repeatable)")
    p.add_argument("--instances", type=int, help="instances per template (replaces the grid's)")
    p.add_argument("--out", type=Path, help="the run directory (default: runs/<grid>); a re-run "
                   "into it resumes, running only the cells not yet recorded")
    p.add_argument("--concurrency", type=int, default=1, metavar="N",
                   help="episodes in flight at once in each worker (default 1)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes (default 1)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="where episodes run: local (this machine: --workers processes, default) "
                        "or ray (a Ray cluster; needs pip install 'limbo-bench[ray]')")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="with --executor ray: the cluster's head node, HOST:PORT (default: "
                        "$RAY_ADDRESS, else a cluster started on this machine, else a new one)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="run at most N episodes of those left, then stop (0: count them only)")
    p.add_argument("--shard", type=str, metavar="I/N",
                   help="run only shard I of N (cells split by episode id; each shard has its "
                        "own records file and manifest)")
    p.add_argument("--seed", type=int, metavar="S", help="the grid seed (replaces the grid's); "
                   "each cell's world seed derives from it and the task")
    p.add_argument("--max-cost", type=float, metavar="USD",
                   help="a model budget: start an episode only while, at the mean cost per "
                        "episode so far, it stays within USD")
    add_plugin_flag(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the cells and an estimate of model calls and cost; run nothing")
    p.add_argument("--episode-timeout", type=float, default=EPISODE_TIMEOUT_S, metavar="S",
                   help=f"wall-clock limit of one episode, in seconds (default "
                        f"{EPISODE_TIMEOUT_S:g}); an episode past it is recorded as timeout")
    add_provider_flags(p)
    p.add_argument("--quiet", action="store_true", help="no progress, summary only")
    check.add_gate_flags(p)


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as a pair; a :class:`UsageError` naming the valid range otherwise."""
    try:
        index, count = (int(p) for p in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard {text!r} must look like I/N, e.g. 1/3") from None
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: I must be between 1 and N (valid: 1/{count} .. {count}/{count})"
                         if count > 0 else f"--shard {text}: N must be at least 1")
    return index, count


def _apply_flags(grid: Grid, args: argparse.Namespace) -> Grid:
    changes: dict[str, Any] = {}
    notices = list(grid.notices)
    for flag, field in FACTOR_FIELDS.items():
        values = getattr(args, flag)
        if values:
            for value, n in Counter(values).items():
                if n > 1:
                    notices.append(f"--{flag} {value} is given {n} times; it runs once")
            changes[field] = list(dict.fromkeys(values))
    if args.model_param:
        changes["models"] = [with_params(m, args.model_param)
                             for m in changes.get("models", grid.models)]
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.instances is not None:
        if args.instances < 1:
            raise UsageError(f"--instances must be at least 1, got {args.instances}")
        changes["instances"] = args.instances
    if not changes:
        return grid
    return validated({**grid.model_dump(), **changes, "overrides": changes}, "command line",
                     notices)


def check_models(models: list[str], max_cost: float | None, reach: bool = False) -> None:
    """Every model can be built (provider known, SDK and key present), priced when a budget is
    set, and — when ``reach`` — its endpoint answers."""
    from limbo.adapter import parse_model

    for spec in models:
        adapter = _built(spec, reach)
        _, model, params = parse_model(spec)
        if max_cost is not None and _price(adapter, spec, model, params) is None:
            raise UsageError(f"--max-cost: no price known for {spec}; add it to a price file "
                             f"or run without --max-cost")


def _built(spec: str, reach: bool) -> ModelAdapter:
    """An adapter for ``spec``, checked the way a run will use it; any failure of the user's
    adapter class (its constructor or preflight raising) is one line naming it."""
    import inspect

    from limbo.adapter import ModelAdapter, make_adapter
    from limbo.isolation import escapes, where

    try:
        adapter = make_adapter(spec)
        generate = getattr(type(adapter), "generate", None)
        if generate is ModelAdapter.generate or not inspect.iscoroutinefunction(generate):
            raise UsageError(f"model {spec}: the adapter {type(adapter).__name__} must define "
                             f"`async def generate(self, messages, tools, ctx)`")
        if reach:
            adapter.preflight()
        return adapter
    except BaseException as exc:
        if escapes(exc):
            raise
        raise UsageError(f"model {spec}: the adapter failed before the run: {where(exc)}") from None


def _price(adapter: ModelAdapter, spec: str, model: str,
           params: dict[str, Any]) -> dict[str, float] | None:
    from limbo.isolation import where

    try:
        return type(adapter).price_per_mtok(model, params)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's adapter, reported in one line
        raise UsageError(f"model {spec}: price_per_mtok raised {where(exc)}") from None


def _check_numbers(args: argparse.Namespace) -> None:
    if args.max_cost is not None and not 0 <= args.max_cost < math.inf:
        raise UsageError(f"--max-cost must be a finite amount of USD >= 0, got {args.max_cost}")
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit must be at least 0, got {args.limit}")
    for name in ("workers", "concurrency"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.concurrency > MAX_CONCURRENCY:
        raise UsageError(f"--concurrency {args.concurrency} is more than {MAX_CONCURRENCY} "
                         f"episodes in flight at once; choose 1..{MAX_CONCURRENCY}")
    timeout = args.episode_timeout
    if not 0 < timeout < math.inf:
        raise UsageError(f"--episode-timeout must be a finite number of seconds > 0, got {timeout}")


MAX_CONCURRENCY = 10_000


def _check_executor(args: argparse.Namespace) -> None:
    if args.executor != "ray":
        if args.ray_address is not None:
            raise UsageError("--ray-address needs --executor ray")
        return
    from limbo.ray_executor import require

    require()
    if args.max_cost is not None:
        raise UsageError("--max-cost runs its episodes in this process, one budget check per "
                         "start; drop --executor ray for a budgeted run")


def _load(args: argparse.Namespace) -> list[Grid]:
    """The grids named, with the command line's flags applied (cheap: no model is built)."""
    if args.out is not None:
        check_dir(args.out, "--out")
    refs = list(dict.fromkeys(args.grids))
    if args.out is not None and len(refs) > 1:
        raise UsageError(f"--out names one run directory, and {len(refs)} grids need one each: "
                         f"drop --out (each grid goes to runs/<name>), or write one grid that "
                         f"includes them (include = [...])")
    return [_apply_flags(load_grid(ref), args) for ref in refs]


def _validate(grids: list[Grid], args: argparse.Namespace) -> None:
    """Everything else a run would trip on: factor levels, size, the models (built, priced
    under a budget, their endpoints reached)."""
    for grid in grids:
        resolved(grid)
        check_comparisons(grid)
        check_size(grid)
        check_models(grid.models, args.max_cost, reach=not args.dry_run)


# Rough sizes of one model call in an episode, for the dry-run estimate only: the tool
# definitions and instructions dominate the input; replies are short tool calls.
EST_TURNS, EST_INPUT_TOKENS, EST_OUTPUT_TOKENS = 6, 3000, 150


def _estimate(model: str) -> float | None:
    """Estimated USD per episode of ``model``; ``None`` when its price is unknown."""
    from limbo.adapter import parse_model

    _, name, params = parse_model(model)
    price = _price(_built(model, False), model, name, params)
    if price is None:
        return None
    per_call = EST_INPUT_TOKENS * price["input"] + EST_OUTPUT_TOKENS * price["output"]
    return EST_TURNS * per_call / 1e6


def _dry_run(grid: Grid, shard: tuple[int, int] | None, console: Any) -> None:
    """Count the cells as they stream by: nothing is kept but a count per model."""
    source = CellSource(grid)
    counts: Counter[str] = Counter(c.model for c in source if in_shard(c.episode_id, shard))
    _dropped(source, console)
    total = sum(counts.values())
    console.print(f"grid {grid.name}: {total} episodes"
                  + (f" (shard {shard[0]}/{shard[1]})" if shard else ""), highlight=False)
    for model, n in counts.items():
        usd = _estimate(model)
        cost = "price unknown" if usd is None else f"~${n * usd:.2f}"
        console.print(f"  {model}: {n} episodes, expected model calls ~{n * EST_TURNS}, {cost}",
                      highlight=False)
    console.print(f"expected model calls: ~{total * EST_TURNS} (about {EST_TURNS} per "
                  f"episode)", highlight=False)


def _dropped(source: CellSource, console: Any) -> None:
    for reason, count in sorted(source.dropped.items()):
        console.print(f"dropped {count} cells: {reason}", highlight=False)


class _Progress:
    """Rich progress bar on a terminal; a plain line every few seconds otherwise."""

    def __init__(self, console: Any, total: int, quiet: bool) -> None:
        from limbo.runtime import stopwatch

        self.console, self.total, self.quiet = console, total, quiet
        self.clock = stopwatch
        self.start = self.last = stopwatch()
        self.bar: Any = None
        if console.is_terminal and not quiet:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                                TimeRemainingColumn(), console=console)
            self.task = self.bar.add_task("episodes", total=total, note="")
            self.bar.start()

    def _note(self, done: int, summary: Summary) -> str:
        rate = done / max(self.clock() - self.start, 1e-9)
        dup = summary.total.rate("duplicate")
        unknown = summary.total.cost_unknown
        cost = f"cost ${summary.total.cost:.4f}" + (f" (+{unknown} unpriced)" if unknown else "")
        calls = progress_note()  # provider calls in flight and the limiter's current limit
        elsewhere = activity.note()  # a cluster's nodes and cells in flight
        return f"{rate:.0f}/s  dup {100 * (dup or 0):.1f}%  {cost}" + "".join(
            f"  {text}" for text in (calls, elsewhere) if text)

    def __call__(self, done: int, total: int, summary: Summary) -> None:
        now = self.clock()
        if self.bar is not None:  # the bar redraws ten times a second: updating it more is waste
            if now - self.last >= BAR_EVERY_S or done >= total:
                self.last = now
                self.bar.update(self.task, completed=done, total=total,
                                note=self._note(done, summary))
            return
        if self.quiet or (now - self.last < PROGRESS_EVERY_S and done < total):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (total - done) / rate if rate else 0.0
        self.console.print(f"[limbo] {done}/{total} episodes  ETA {eta:.0f}s  "
                           f"{self._note(done, summary)}", highlight=False, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run(args: argparse.Namespace) -> int:
    load_plugins(args)
    apply_providers(args)
    return run_grids(args, console())


def run_grids(args: argparse.Namespace, console: Any) -> int:
    """Validate everything, then run (or, with ``--dry-run``, count) each grid."""
    shard = parse_shard(args.shard) if args.shard else None
    _check_numbers(args)
    _check_executor(args)
    outs: list[Path] = []
    grids = _load(args)
    with _executor(args, grids):  # a cluster's workers start while the grids are checked
        _validate(grids, args)
        gate = check.gate_options(args)
        _warm(args)
        freeze_heap()
        for grid in grids:
            _one_grid(grid, shard, args, console, outs)
    return check.gate_runs(outs, gate, args.junit, console.file) if gate and outs else 0


def _executor(args: argparse.Namespace,
              grids: list[Grid]) -> contextlib.AbstractContextManager[None]:
    """Connected to the Ray cluster for the whole command (``--executor ray``, not a dry run):
    a cluster that cannot be reached is one line before any run directory is touched. The
    grids' models tell the workers which SDKs to import as they start."""
    if args.executor != "ray" or args.dry_run:
        return contextlib.nullcontext()
    from limbo.ray_executor import connected

    return connected(args.ray_address, [m for grid in grids for m in grid.models])


def _warm(args: argparse.Namespace) -> None:
    if args.executor == "ray" and not args.dry_run:
        from limbo.ray_executor import warm

        warm()


def _one_grid(grid: Grid, shard: tuple[int, int] | None, args: argparse.Namespace,
              console: Any, outs: list[Path]) -> None:
    for text in grid.notices:
        console.print(f"note: {text}", highlight=False, markup=False, soft_wrap=True)
    if args.dry_run:
        _dry_run(grid, shard, console)
        return
    out = args.out or Path("runs") / grid.name
    check_dir(out, "--out")
    outs.append(out)
    _run_grid(grid, out, shard, args, console)


def _run_grid(grid: Grid, out: Path, shard: tuple[int, int] | None, args: argparse.Namespace,
              console: Any) -> None:
    source = CellSource(grid)
    the_plan = plan(source, shard)
    _dropped(source, console)
    if args.limit == 0:
        done = len(set(the_plan.mine) & scan(out).ids) if out.is_dir() else 0
        console.print(f"grid {grid.name}: --limit 0, so nothing ran; {len(the_plan.mine) - done} "
                      f"of {len(the_plan.mine)} episodes are left to run in {out}",
                      highlight=False, markup=False)
        return
    opts = RunOptions(out=out, workers=args.workers, concurrency=args.concurrency,
                      limit=args.limit, shard=shard, max_cost=args.max_cost,
                      plugins=list(args.plugin), episode_timeout=args.episode_timeout,
                      executor=args.executor, ray_address=args.ray_address)
    manifest = {"grid": grid.model_dump(mode="json"), "levels": resolved(grid),
                "design": design(grid),
                "dropped": dict(source.dropped), **provenance(),
                "argv": [scrub(a) for a in sys.argv[1:]]}
    progress = _Progress(console, len(the_plan.mine), args.quiet)

    def notice(text: str) -> None:
        console.print(text, highlight=False, markup=False, soft_wrap=True)

    try:
        result = run_cells(source, opts, manifest, progress, notice, the_plan)
    finally:
        progress.close()
    left = f", {result.left} left to run" if result.left else ""
    console.print(f"grid {grid.name}: ran {result.ran} episodes, {result.skipped} already "
                  f"done{left}, in {result.wall_s:.1f}s → {out}", highlight=False, markup=False,
                  soft_wrap=True)
    if result.stopped:
        console.print(f"stopped: {result.stopped}", highlight=False)
    render(result.summary, console)
