"""``limbo episode``: run one cell and print its timeline — what the agent saw and, beside it,
what really happened.

The cell comes from flags or, with ``--from RUN_DIR EPISODE_ID``, from a stored record. Either
way it is the cell a grid runs: ``--seed`` is the grid seed, as in ``limbo run``, and the
world seed derives from it and the task (:func:`limbo.experiments.grid.world_seed`), so the
flags of a default-grid cell re-run that very cell. ``--from`` is
:mod:`limbo.commands.episode_from`: the stored cell, with what its run used, and whether the
new record reproduces the stored one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from limbo.base.errors import UsageError
from limbo.commands import command_parser
from limbo.commands.common import (
    add_plugin_flag,
    add_provider_flags,
    console,
    load_plugins,
    provider_options,
    with_params,
)
from limbo.providers.options import using
from limbo.sim.config import EPISODE_TIMEOUT_S

TEMPLATE = "charge_invoice"
"""The task when no ``--template`` is given."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo episode`` on the CLI's subparsers."""
    from limbo.sim.cell import Cell

    default = {name: f.default for name, f in Cell.model_fields.items()}
    p = command_parser(sub, "episode")
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
    p.add_argument("--episode-timeout", type=float, default=EPISODE_TIMEOUT_S, metavar="S",
                   help=f"wall-clock limit of the episode, in seconds (default "
                        f"{EPISODE_TIMEOUT_S:g}); past it the episode ends as timeout")
    p.add_argument("--no-preflight", action="store_true",
                   help="do not check a real model with one cheap call first")
    add_provider_flags(p)


def run(args: argparse.Namespace) -> int:
    import math

    from limbo.commands.episode_from import adopt_run_options, stored_cell, verdict
    from limbo.commands.model_check import check_models
    from limbo.episode.run_one import run_episode
    from limbo.episode.timeline import render
    from limbo.log.store import dumps
    from limbo.sim.transport import joined

    if not 0 < args.episode_timeout < math.inf:
        raise UsageError(f"--episode-timeout must be a finite number of seconds > 0, got "
                         f"{args.episode_timeout}")
    if args.source:
        adopt_run_options(args)  # the run's plugins and price files
    load_plugins(args)
    with using(provider_options(args)):
        cell = stored_cell(args) if args.source else flag_cell(args)
        _check_levels(cell)
        check_models([joined(cell.model, cell.transport)], None, reach=not args.no_preflight)
        record = run_episode(cell, timeout=args.episode_timeout)
    if args.json:
        print(dumps(record))
    else:
        render(record, console())
    if args.source:
        print(verdict(args, record), file=sys.stderr if args.json else sys.stdout)
    return 0


def flag_cell(args: argparse.Namespace) -> Any:
    """The cell the flags name, seeded as a grid with seed ``--seed`` seeds it."""
    from limbo.episode.world_trial import tried
    from limbo.experiments.grid import world_seed
    from limbo.sim.cell import Cell
    from limbo.sim.worldfile.kit import kit, load_world

    world = tried(load_world(args.world).runnable(), args.world) if args.world else kit(None)
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
    from limbo.commands.episode_from import build_cell

    return build_cell({**raw, **task, "service": t.service, "seed": seed,
                       "world": world.identity}, lambda loc: "--" + loc.replace("_", "-"))


def _check_levels(cell: Any) -> None:
    """Every level of ``cell`` is registered, and its fault can act on its focal write."""
    from limbo.base.registry import lookup
    from limbo.experiments.grid import FACTOR_FIELDS, resolved, validated
    from limbo.sim.worldfile.kit import kit

    names = ("contract", "fault", "condition", "harness", *(("template",) if not cell.world else ()))
    resolved(validated({FACTOR_FIELDS[name]: [getattr(cell, name)] for name in names},
                       "command line"))
    op = kit(cell.world).ops[cell.focal_write]
    if not lookup("fault", cell.fault).applies(op):
        raise UsageError(f"fault {cell.fault} cannot act on {cell.focal_write} (batch writes only)")
