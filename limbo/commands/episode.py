"""``limbo episode``: run one cell and print its timeline — what the agent saw and, beside it,
what really happened.

The cell comes from flags or, with ``--from RUN_DIR EPISODE_ID``, from a stored record. Either
way it is the cell a grid runs: ``--seed`` is the grid seed, as in ``limbo run``, and the
world seed derives from it and the task (:func:`limbo.experiments.grid.world_seed`), so the
flags of a default-grid cell re-run that very cell. ``--from`` also restores the timing and
limits of the grid that ran it (from the run's manifest), and checks that the rebuilt cell
hashes to the stored id before running anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from limbo.commands.common import (
    add_plugin_flag,
    add_provider_flags,
    apply_providers,
    console,
    load_plugins,
    with_params,
)
from limbo.errors import UsageError

TEMPLATE = "charge_invoice"
"""The task when no ``--template`` is given."""
CELL_FLAGS = ("model", "harness", "condition", "contract", "fault", "template", "focal_write",
              "instance", "seed", "model_param", "world")
"""The flags that pick a cell; ``--from`` takes the whole cell from the record instead."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo episode`` on the CLI's subparsers."""
    from limbo.cell import Cell

    default = {name: f.default for name, f in Cell.model_fields.items()}
    p = sub.add_parser("episode", help="run one cell (given by flags, or a stored one with "
                                       "--from) and print its timeline")
    p.add_argument("--from", dest="source", nargs=2, metavar=("RUN_DIR", "EPISODE_ID"),
                   help="re-run exactly the cell of a stored episode (with its grid's timing "
                        "and limits); the flags that pick a cell cannot be given with it")
    p.add_argument("--model", help=f"provider/model (default {default['model']})")
    p.add_argument("--harness", help=f"the agent loop (default {default['harness']})")
    p.add_argument("--condition", help=f"the recovery condition (default {default['condition']})")
    p.add_argument("--contract", help=f"the tool contract (default {default['contract']})")
    p.add_argument("--fault", help=f"the fault mode at the focal write (default {default['fault']})")
    p.add_argument("--template", help=f"the task template, which names the service (default "
                                      f"{TEMPLATE})")
    p.add_argument("--focal-write", help="the write the fault acts on (default: the template's "
                                         "first)")
    p.add_argument("--instance", type=int, help="the task instance (default 0)")
    p.add_argument("--seed", type=int, metavar="S", help="the grid seed, as in `limbo run "
                   "--seed` (default 0); the world seed derives from it and the task")
    p.add_argument("--world", metavar="FILE_OR_DIR",
                   help="a world file (docs/worlds.md): the template is one of its own")
    add_plugin_flag(p)
    p.add_argument("--json", action="store_true", help="print the record as JSON (one line)")
    add_provider_flags(p)


def run(args: argparse.Namespace) -> int:
    from limbo.commands.run import check_models
    from limbo.episode import run_episode
    from limbo.store import dumps
    from limbo.timeline import render

    load_plugins(args)
    apply_providers(args)
    cell = stored_cell(args) if args.source else flag_cell(args)
    _check_levels(cell)
    check_models([cell.model], None, reach=True)
    record = run_episode(cell)
    if args.json:
        print(dumps(record))
    else:
        render(record, console())
    return 0


def flag_cell(args: argparse.Namespace) -> Any:
    """The cell the flags name, seeded as a grid with seed ``--seed`` seeds it."""
    from limbo.cell import Cell
    from limbo.experiments.grid import world_seed
    from limbo.worldfile.kit import kit, load_world

    world = load_world(args.world).runnable() if args.world else kit(None)
    if args.template is None and world.identity is not None:
        raise UsageError(f"--world: name one of its templates with --template: "
                         f"{', '.join(world.templates)}")
    t = world.template(args.template or TEMPLATE)
    focal = args.focal_write or t.focal_writes[0]
    if focal not in t.focal_writes:
        raise UsageError(f"--focal-write {focal!r} is not a write of {t.id}; choose from: "
                         f"{', '.join(t.focal_writes)}")
    instance = 0 if args.instance is None else args.instance
    task = {"template": t.id, "focal_write": focal, "instance": instance}
    raw = {name: getattr(args, name) for name in ("model", "harness", "condition", "contract",
                                                   "fault") if getattr(args, name) is not None}
    if args.model_param:
        model = raw.get("model", Cell.model_fields["model"].default)
        raw["model"] = with_params(model, args.model_param)
    seed = world_seed(0 if args.seed is None else args.seed, task)
    return _cell({**raw, **task, "service": t.service, "seed": seed, "world": world.identity},
                 lambda loc: "--" + loc.replace("_", "-"))


def stored_cell(args: argparse.Namespace) -> Any:
    """The cell of the stored episode ``--from`` names, rebuilt with the timing and limits
    under which it hashes to its id."""
    from limbo.commands.show import stored_record

    given = [f"--{n.replace('_', '-')}" for n in CELL_FLAGS if getattr(args, n) not in (None, [])]
    if given:
        raise UsageError(f"--from re-runs the stored cell as it was; drop {', '.join(given)}")
    run_dir, episode_id = Path(args.source[0]), args.source[1]
    record = stored_record(run_dir, episode_id)
    where = f"episode {episode_id} in {run_dir}"
    settings, problem = _settings(run_dir)
    for timing, limits in settings:
        for world in _worlds(run_dir):
            cell = _cell({**record["cell"], "timing": timing, "limits": limits, "world": world},
                         lambda loc: f"{where}: cell.{loc}")
            if cell.episode_id == episode_id:
                return cell
    if problem is not None:
        raise UsageError(f"{where}: cannot recover the timing and limits of its grid "
                         f"({problem}); run from the directory the run started in")
    raise UsageError(f"{where}: its cell does not hash to its id under the timing and limits "
                     f"of the run's grid; was the record or the manifest edited by hand?")


def _worlds(run_dir: Path) -> list[str | None]:
    """The worlds a cell of ``run_dir`` may have run in: the built-in one, and each world file
    its manifests name, loaded from where the run found it (an edited file is another world,
    whose cells hash to other ids)."""
    from limbo.store import manifests
    from limbo.worldfile.kit import load_world

    found: list[str | None] = [None]
    for manifest in manifests(run_dir).values():
        for world in manifest.get("worlds") or ():
            path = world.get("path") if isinstance(world, dict) else None
            if isinstance(path, str) and Path(path).exists():
                found.append(load_world(path).identity)
    return list(dict.fromkeys(found))


def _settings(run_dir: Path) -> tuple[list[tuple[Any, Any]], str | None]:
    """The (timing, limits) pairs a cell of ``run_dir`` may have run under — the defaults, and
    those of each manifest's grid and of the grids it includes — and why a grid could not be
    loaded, if one could not (an include named by a relative path, say)."""
    from limbo.experiments.grid import Grid, included, validated
    from limbo.store import manifests

    found: list[tuple[Any, Any]] = [(None, None)]
    problem = None
    for name, manifest in manifests(run_dir).items():
        raw = manifest.get("grid")
        if not isinstance(raw, dict):
            continue
        try:
            grid = validated(raw, f"{run_dir / name}")
            grids: list[Grid] = [grid, *included(grid)]
        except UsageError as exc:
            problem = problem or str(exc)
            continue
        found += [(g.timing, g.limits) for g in grids]
    return found, problem


def _cell(raw: dict[str, Any], name: Callable[[str], str]) -> Any:
    """``raw`` as a :class:`~limbo.cell.Cell`; a one-line error naming the bad field (as
    ``name`` spells a field's location for the user)."""
    from pydantic import ValidationError

    from limbo.cell import Cell

    try:
        return Cell.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise UsageError(f"{name('.'.join(map(str, err['loc'])))}: {err['msg']}") from None


def _check_levels(cell: Any) -> None:
    """Every level of ``cell`` is registered, and its fault can act on its focal write."""
    from limbo.experiments.grid import FACTOR_FIELDS, resolved, validated
    from limbo.registry import lookup
    from limbo.worldfile.kit import kit

    names = ("contract", "fault", "condition", "harness", *(("template",) if not cell.world else ()))
    resolved(validated({FACTOR_FIELDS[name]: [getattr(cell, name)] for name in names},
                       "command line"))
    op = kit(cell.world).ops[cell.focal_write]
    if not lookup("fault", cell.fault).applies(op):
        raise UsageError(f"fault {cell.fault} cannot act on {cell.focal_write} (batch writes only)")
