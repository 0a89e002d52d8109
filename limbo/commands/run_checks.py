"""Everything ``limbo run`` checks before it touches a run directory: the numbers and flags,
the grids with the command line's changes applied, their levels and size, and the models
(:mod:`limbo.commands.model_check`). A mistake is one line naming what to fix, and nothing is
written."""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.commands.common import with_params
from limbo.commands.model_check import check_models
from limbo.commands.paths import check_output
from limbo.commands.world_change import against, refuse
from limbo.episode.world_trial import tried
from limbo.experiments.design import check_comparisons
from limbo.experiments.grid import (
    FACTOR_FIELDS,
    MAX_REPEATS,
    Grid,
    check_size,
    load_grid,
    resolved,
    validated,
    world_facts,
    world_paths,
)
from limbo.log.errored import RETRY_CHOICES
from limbo.sim.worldfile.kit import load_world

MAX_CONCURRENCY = 10_000


def retry_value(text: str) -> str:
    """The value of ``--retry-errors=...`` (argparse ``type``)."""
    if text not in RETRY_CHOICES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: --retry-errors takes no value (errored cells) or =timeout (timed-out "
            f"cells too); put grid names before it")
    return text


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


def apply_flags(grid: Grid, args: argparse.Namespace) -> Grid:
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
    if args.world is not None:
        changes["world"] = args.world
    if args.instances is not None:
        if args.instances < 1:
            raise UsageError(f"--instances must be at least 1, got {args.instances}")
        changes["instances"] = args.instances
    if args.repeats is not None:
        if not 1 <= args.repeats <= MAX_REPEATS:
            raise UsageError(f"--repeats must be between 1 and {MAX_REPEATS:,}, got {args.repeats}")
        changes["repeats"] = args.repeats
    if not changes:
        return grid
    return validated({**grid.model_dump(), **changes, "overrides": changes}, "command line",
                     notices)


def check_numbers(args: argparse.Namespace) -> None:
    if args.max_cost is not None and not 0 <= args.max_cost < math.inf:
        raise UsageError(f"--max-cost must be a finite amount of USD >= 0, got {args.max_cost}")
    if args.allow_unpriced and args.max_cost is None:
        raise UsageError("--allow-unpriced only makes sense with --max-cost")
    if args.error_streak < 0:
        raise UsageError(f"--error-streak must be at least 0 (0: never stop), got "
                         f"{args.error_streak}")
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


def check_executor(args: argparse.Namespace) -> None:
    if args.executor != "ray":
        if args.ray_address is not None:
            raise UsageError("--ray-address needs --executor ray")
        return
    from limbo.run.ray.session import require

    require()


def load(args: argparse.Namespace) -> list[Grid]:
    """The grids named, with the command line's flags applied (cheap: no model is built)."""
    if args.out is not None:
        check_output(args.out, "--out", run=True)
    refs = list(dict.fromkeys(args.grids))
    if args.out is not None and len(refs) > 1:
        raise UsageError(f"--out names one run directory, and {len(refs)} grids need one each: "
                         f"drop --out (each grid goes to runs/<name>), or write one grid that "
                         f"includes them (include = [...])")
    return [apply_flags(load_grid(ref), args) for ref in refs]


def validate(grids: list[Grid], args: argparse.Namespace) -> list[str]:
    """Everything else a run would trip on: a world file's templates whose own plans fail,
    factor levels, size, the models (built, priced
    under a budget, each answering its preflight unless ``--no-preflight`` or a dry run). The
    notices to print."""
    notices: list[str] = []
    for grid in grids:
        for path in world_paths(grid):
            tried(load_world(path), path)  # loaded by now: its templates' plans run once
        _replayed_worlds(grid)
        resolved(grid)
        check_comparisons(grid)
        check_size(grid)
        if not args.dry_run or args.pilot:  # a pilot runs real cells
            reach = not args.no_preflight
            notices += check_models(grid.models, args.max_cost, reach, args.allow_unpriced)
    return list(dict.fromkeys(notices))


def _replayed_worlds(grid: Grid) -> None:
    """A replay of a run whose world file has changed since is refused naming the file (each
    episode would find no recorded turns: its id is another cell's)."""
    for model in grid.models:
        if model.startswith("replay/"):
            run_dir = Path(model.removeprefix("replay/").partition("?")[0])
            refuse(f"--model {model}: that run cannot be replayed on this world",
                   against(run_dir, world_facts(grid).get("worlds", [])))


def argv_of(args: argparse.Namespace) -> list[str]:
    """The command line as given (what the manifest records, for the commands it prints)."""
    given: Any = getattr(args, "argv", None)
    return [str(a) for a in given] if isinstance(given, list) else []
