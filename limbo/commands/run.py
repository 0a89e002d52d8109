"""``limbo run``: expand grids, check everything a user could get wrong, run, summarise.

All checks happen before the run directory is touched (:mod:`limbo.commands.run_checks`), so
bad input writes nothing. A run whose grid has real harness processes or real models first
says how many and how long (:mod:`limbo.commands.run_plan`); its end lists errored episodes
by reason (:mod:`limbo.commands.run_output`). Exit status: 0 when every episode run or
recorded ended without an error; 1 when errored cells remain (``--retry-errors`` runs them
again) or a gate failed; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.provenance import provenance
from limbo.base.secrets import scrub
from limbo.base.words import plural
from limbo.commands import check, command_parser, run_samples
from limbo.commands.common import (
    add_plugin_flag,
    add_provider_flags,
    console,
    load_plugins,
    provider_options,
)
from limbo.commands.paths import check_output
from limbo.commands.run_checks import (
    argv_of,
    check_executor,
    check_numbers,
    load,
    parse_shard,
    retry_value,
    validate,
)
from limbo.commands.run_forecast import check_pilot
from limbo.commands.run_output import Progress, report_end, say
from limbo.experiments.design import design
from limbo.experiments.grid import (
    FACTOR_FIELDS,
    Grid,
    resolved,
    world_facts,
    world_paths,
)
from limbo.experiments.source import CellSource
from limbo.log.errored import retried
from limbo.log.rerun import where
from limbo.log.store import Scan, scan
from limbo.providers.options import using
from limbo.run.breaker import STREAK
from limbo.run.context import Executor, RunContext, Settings
from limbo.run.local import freeze_heap
from limbo.run.plan import Plan, plan
from limbo.run.runner import EXECUTORS, local_executor, run_cells
from limbo.sim.config import EPISODE_TIMEOUT_S
from limbo.sim.transport import transports


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo run`` on the CLI's subparsers."""
    p = command_parser(sub, "run")
    p.add_argument("grids", nargs="*", default=["default"], metavar="GRID",
                   help="built-in grid names or TOML files (default: default)")
    for flag, field in FACTOR_FIELDS.items():
        p.add_argument(f"--{flag}", action="append", metavar=flag.upper(),
                       help=f"replace the grid's {field} (repeatable)")
    p.add_argument("--instances", type=int, help="instances per template (replaces the grid's)")
    p.add_argument("--repeats", type=int, metavar="K",
                   help="run every cell K times, each in the same world with its own "
                        "model-sampling seed (replicate 0 .. K-1; default 1)")
    p.add_argument("--world", metavar="FILE_OR_DIR",
                   help="run the grids on a world file (your own API, docs/worlds.md) instead "
                        "of the built-in services")
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
    run_samples.add_flags(p)
    _add_real_model_flags(p)
    add_plugin_flag(p)
    p.add_argument("--episode-timeout", type=float, default=EPISODE_TIMEOUT_S, metavar="S",
                   help=f"wall-clock limit of one episode, in seconds (default "
                        f"{EPISODE_TIMEOUT_S:g}); an episode past it is recorded as timeout")
    add_provider_flags(p)
    p.add_argument("--quiet", action="store_true", help="no progress, summary only")
    check.add_gate_flags(p)




def _add_real_model_flags(p: argparse.ArgumentParser) -> None:
    """The flags for runs against real endpoints: budgets, errored cells, the preflight."""
    p.add_argument("--dry-run", action="store_true",
                   help="print the cells, the real harness processes and model calls, and the "
                        "forecast of their cost, calls and duration; run nothing (but --pilot)")
    p.add_argument("--pilot", type=int, metavar="N",
                   help="with --dry-run: first run N cells of each real model for real "
                        "(recorded in --out: the run will not run them again), and forecast "
                        "the rest from them")
    p.add_argument("--allow-unpriced", action="store_true",
                   help="with --max-cost: run models without a known price too (the budget "
                        "cannot count their cost)")
    p.add_argument("--retry-errors", nargs="?", const="errors", type=retry_value,
                   metavar="timeout",
                   help="run again the cells whose record ended in infra_error or model_error "
                        "(=timeout: and in timeout); the old records are kept in "
                        "superseded.jsonl, counted by no reader")
    p.add_argument("--error-streak", type=int, default=STREAK, metavar="N",
                   help=f"stop the run once N episodes in a row ended in model_error with the "
                        f"same cause (default {STREAK}; 0: never); the cells left run again "
                        f"with --retry-errors")
    p.add_argument("--no-preflight", action="store_true",
                   help="do not check each real model with one cheap call before the first "
                        "cell (e.g. to re-run from the response cache without the endpoint)")


def run(args: argparse.Namespace) -> int:
    load_plugins(args)
    providers = provider_options(args)
    settings = Settings(concurrency=args.concurrency, episode_timeout=args.episode_timeout,
                        plugins=tuple(args.plugin), providers=providers)
    with using(providers):  # for the model checks here; each executor binds its episodes'
        return run_grids(args, console(), settings)


def run_grids(args: argparse.Namespace, console: Any, settings: Settings) -> int:
    """Validate everything, then run (or, with ``--dry-run``, count) each grid, all on one
    executor made here (the command's edge: every setting is read by now)."""
    shard = parse_shard(args.shard) if args.shard else None
    check_numbers(args)
    run_samples.check(args)
    check_pilot(args)
    check_executor(args)
    outs: list[Path] = []
    code = 0
    grids = load(args)
    with _executor(args, grids) as executor:  # a cluster's workers start while grids are checked
        for text in validate(grids, args):
            say(console, f"note: {text}")
        gate = check.gate_options(args)
        _warm(args)
        freeze_heap()
        for grid in grids:
            ctx = RunContext(out=Path(), settings=replace(settings, worlds=tuple(world_paths(grid))),
                             workers=args.workers, limit=args.limit, shard=shard,
                             max_cost=args.max_cost, retry=retried(args.retry_errors),
                             error_streak=args.error_streak, executor=executor)
            code = max(code, _one_grid(grid, ctx, args, console, outs))
    gated = check.gate_runs(outs, gate, args.junit, console.file) if gate and outs else 0
    return max(code, gated)


@contextlib.contextmanager
def _executor(args: argparse.Namespace, grids: list[Grid]) -> Iterator[Executor]:
    """The command's one executor, closed when it ends. With ``--executor ray`` (not a dry
    run), connected to the cluster for the whole command: a cluster that cannot be reached is
    one line before any run directory is touched, and the grids' models tell the workers which
    SDKs to import as they start."""
    if args.executor != "ray" or args.dry_run:
        executor = local_executor(args.workers)
        try:
            yield executor
        finally:
            executor.close()
        return
    from limbo.run.ray.executor import RayExecutor
    from limbo.run.ray.session import connected

    with connected(args.ray_address, [m for grid in grids for m in grid.models]):
        yield RayExecutor()


def _warm(args: argparse.Namespace) -> None:
    if args.executor == "ray" and not args.dry_run:
        from limbo.run.ray.session import warm

        warm()


def _one_grid(grid: Grid, ctx: RunContext, args: argparse.Namespace, console: Any,
              outs: list[Path]) -> int:
    """Run (or count) one grid; its exit status (:func:`limbo.commands.run_output.report_end`)."""
    for text in grid.notices:
        say(console, f"note: {text}")
    out = args.out or Path("runs") / grid.name
    if args.dry_run:
        from limbo.commands.run_plan import dry_run

        code = _pilot(grid, replace(ctx, out=out), args, console) if args.pilot else 0
        dry_run(grid, ctx.shard, args, console, out, _kept(out, args)[0])
        return code
    check_output(out, "--out", run=True)
    outs.append(out)
    return _run_grid(grid, replace(ctx, out=out), args, console)


def _pilot(grid: Grid, ctx: RunContext, args: argparse.Namespace, console: Any) -> int:
    """``--dry-run --pilot N``: run N cells of each real model for real, into the run."""
    from limbo.commands.run_forecast import pilot_cells

    check_output(ctx.out, "--out", run=True)
    source = CellSource(grid)
    the_plan = plan(source, ctx.shard)
    found = scan(ctx.out) if ctx.out.is_dir() else None
    recorded = set() if found is None else found.ids - set(found.errored)  # what it learns from
    only = pilot_cells(source, the_plan, ctx.shard, recorded, args.pilot)
    if not only:
        say(console, f"pilot: every real model has {plural(args.pilot, 'episode')} recorded "
                     f"in {ctx.out} already; nothing to run")
        return 0
    _warm_up(source, only)
    return _run_grid(grid, replace(ctx, only=only), args, console, pilot=True)


def _warm_up(source: CellSource, only: frozenset[str]) -> None:
    """Run one pilot cell offline first (its shape), so that the pilot's first episode does
    not pay for this process's first imports and world: what a pilot measures per episode is
    what every later episode costs, and the forecast scales it to the whole pass."""
    from limbo.run.shapes import shapes

    shapes([next(c for c in source if c.episode_id in only)])


def _run_grid(grid: Grid, ctx: RunContext, args: argparse.Namespace, console: Any,
              pilot: bool = False) -> int:
    out, shard = ctx.out, ctx.shard
    source = CellSource(grid)
    the_plan = plan(source, shard)
    _dropped(grid.name, source.dropped, the_plan, console)
    _same_worlds(out, grid, the_plan)
    kept, found = _kept(out, args)
    if args.limit == 0:
        left = len(the_plan.mine) - len(kept & set(the_plan.mine))
        say(console, f"grid {grid.name}: --limit 0, so nothing ran; {left:,} of "
                     f"{plural(len(the_plan.mine), 'episode')} {'is' if left == 1 else 'are'} "
                     f"left to run in {out}")
        return 0
    todo = [i for i in the_plan.mine if i not in kept and (ctx.only is None or i in ctx.only)]
    todo = todo if args.limit is None else todo[:args.limit]
    foreseen = _foresee(grid, source, todo, kept, ctx, args, console, pilot)
    argv = [scrub(a) for a in argv_of(args)]
    manifest = {"grid": grid.model_dump(mode="json"), "levels": resolved(grid),
                "design": design(grid), "dropped": dict(source.dropped), **world_facts(grid), **provenance(),
                "argv": argv,
                "transport": transports(resolved(grid)["models"]),
                "plugins": [where(p) for p in args.plugin],
                "prices": [str(p.resolve()) for p in args.prices], **foreseen}
    schedule = run_samples.schedule(args, grid, source)
    progress = Progress(console, len(todo), args.quiet)
    try:
        result = run_cells(source, ctx, manifest, progress, lambda text: say(console, text),
                           the_plan, schedule, found)
    finally:
        progress.close()
    code = report_end(result, grid.name, out, console, argv, tables=not pilot)
    facts = schedule.facts()["precision"] if schedule is not None else None
    for line in run_samples.end_lines(grid, out, facts):
        say(console, line)
    return code


def _same_worlds(out: Path, grid: Grid, the_plan: Plan) -> None:
    """A run directory whose run played a world file that has changed since is refused naming
    the file (the runner would see only another grid)."""
    from limbo.commands.world_change import against, refuse
    from limbo.log.store import manifests

    try:
        theirs = {m.get("fingerprint") for m in manifests(out).values()} if out.is_dir() else set()
    except UsageError:  # a manifest that cannot be read: the runner says so, as it checks it
        return
    if theirs - {None, the_plan.fingerprint}:
        refuse(f"{out} holds a run of grid {grid.name!r} that this one cannot resume",
               against(out, world_facts(grid).get("worlds", [])))


def _dropped(name: str, dropped: Counter[str], the_plan: Plan, console: Any) -> None:
    """Say which cells were dropped and why; a grid left with none runs nothing, which is a
    mistake to fix (a harness not installed here), not a finished run."""
    if the_plan.total == 0 and dropped:
        why = "; ".join(f"{plural(n, 'cell')}: {reason}" for reason, n in sorted(dropped.items()))
        raise UsageError(f"grid {name}: every cell was dropped, so nothing can run ({why})")
    for reason, count in sorted(dropped.items()):
        say(console, f"dropped {plural(count, 'cell')}: {reason}")


def _foresee(grid: Grid, source: CellSource, todo: list[str], kept: set[str],
             ctx: RunContext, args: argparse.Namespace, console: Any,
             pilot: bool) -> dict[str, Any]:
    """Before episodes that start real harness processes or call real models: how many, and
    about how long (nothing for a grid of reference policies in the minimal loop); then the
    forecast of the pass, printed, and what the manifest records of it."""
    from limbo.commands.run_forecast import forecast_of
    from limbo.commands.run_plan import count, may_be_real, model_seconds, plan_line
    from limbo.run.outlook import total_line

    if not may_be_real(resolved(grid)):
        return {}
    wanted = set(todo)
    work = count(c for c in source if c.episode_id in wanted)
    at_once = args.concurrency * args.workers
    forecast = None if pilot or not work.models else forecast_of(source, todo, ctx.out, kept,
                                                                 at_once)
    if work.cells:
        say(console, plan_line(work, len(todo), at_once, model_seconds(forecast)))
    if forecast is not None:
        say(console, total_line(forecast))
    return {"pilot": args.pilot} if pilot else (
        {"forecast": forecast.to_json()} if forecast is not None else {})


def _kept(out: Path, args: argparse.Namespace) -> tuple[set[str], Scan | None]:
    """The episodes recorded in ``out`` that this run keeps — all, but those
    ``--retry-errors`` sets aside to run again — and the scan that found them."""
    if not out.is_dir():
        return set(), None
    found = scan(out)
    again = retried(args.retry_errors)
    return {i for i in found.ids
            if i not in found.errored or found.errored[i].termination not in again}, found
