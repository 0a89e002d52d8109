"""``limbo mcp``: one episode served as a standalone MCP server, for any MCP client.

The cell is picked on the command line; the client gets the task as the server's instructions
(and as the prompt ``task``), calls the tools, and ends the episode with ``finish`` or by
disconnecting. The episode is then settled, graded and appended to ``--out`` as a normal record.
Nothing is written to stdout in stdio mode except the protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.sockets import check_port
from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, load_plugins
from limbo.commands.renamed import add_old_name
from limbo.log.records import EpisodeRecord
from limbo.sim.config import Timing

HARNESS = "mcp"
"""The cell's harness: an outside client served by ``limbo mcp``."""
CLIENT_TIMEOUT_S = Timing().client_timeout_s
MAX_SCALE = 100.0
"""As ``limbo proxy``'s: a 30 s timeout held at most 50 minutes."""


def add_parser(sub: Any) -> None:
    """Register ``limbo mcp`` on the CLI's subparsers."""
    from limbo.sim.service import CONTRACTS

    p = command_parser(sub, "mcp")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (the client starts `limbo mcp`) or streamable HTTP on 127.0.0.1 "
                        "(default stdio)")
    p.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0: any free)")
    p.add_argument("--template", default="charge_invoice",
                   help="the task template, which names the service (default charge_invoice)")
    p.add_argument("--focal-write", help="the write the fault acts on (default: the template's "
                                         "first)")
    p.add_argument("--instance", type=int, default=0, help="the task instance (default 0)")
    p.add_argument("--world", metavar="FILE_OR_DIR",
                   help="serve a cell of a world file (docs/worlds.md); --template names one "
                        "of its templates")
    p.add_argument("--fault", default="none", help="the fault mode at the focal write "
                                                    "(default none)")
    p.add_argument("--contract", choices=list(CONTRACTS), default="native",
                   help="the tool contract (default native)")
    p.add_argument("--condition", default="vanilla",
                   help="the recovery condition (default vanilla)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="the grid seed, as in `limbo run --seed` (default 0); the world seed "
                        "derives from it and the task")
    p.add_argument("--model", default="external/mcp-client",
                   help="a label for the client's model in the record")
    scale = p.add_argument(
        "--time-scale", type=float, default=0.0, metavar="F",
        help=f"wall seconds per second of sandbox time where a client waits: a timed-out call "
             f"is held the sandbox's {CLIENT_TIMEOUT_S:g} s client timeout times F before it is "
             f"answered, so the client's own timeout fires (default 0: answered at once)")
    add_old_name(p, "--hold-timeouts", scale, type=float,
                 convert=lambda s: s / CLIENT_TIMEOUT_S,
                 told=lambda s: f"--time-scale {s / CLIENT_TIMEOUT_S:g} (F = S / the sandbox's "
                                f"{CLIENT_TIMEOUT_S:g} s client timeout)")
    p.add_argument("--out", type=Path, default=Path("runs/mcp"),
                   help="the run directory the episode's record is appended to (default runs/mcp)")
    add_plugin_flag(p)


def _cell(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from limbo.base.registry import lookup
    from limbo.episode.world_trial import tried
    from limbo.experiments.grid import world_seed
    from limbo.sim.cell import Cell
    from limbo.sim.worldfile.kit import kit, load_world

    lookup("condition", args.condition)
    fault = lookup("fault", args.fault)
    world = tried(load_world(args.world).runnable(), args.world) if args.world else kit(None)
    t = world.template(args.template)
    focal = args.focal_write or t.focal_writes[0]
    if focal not in t.focal_writes:
        raise UsageError(f"--focal-write {focal!r} is not a write of {t.id}; choose from: "
                         f"{', '.join(t.focal_writes)}")
    if not fault.applies(world.ops[focal]):
        raise UsageError(f"fault {args.fault} cannot act on {focal} (batch writes only)")
    if not 0 <= args.time_scale <= MAX_SCALE:  # NaN fails both
        raise UsageError(f"--time-scale must be a number from 0 to {MAX_SCALE:g}")
    task = {"template": t.id, "focal_write": focal, "instance": args.instance}
    try:
        return Cell(model=args.model, harness=HARNESS, condition=args.condition,
                    contract=args.contract, fault=args.fault, service=t.service, **task,
                    seed=world_seed(args.seed, task), world=world.identity)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise UsageError(f"--{'-'.join(map(str, err['loc']))}: {err['msg']}") from None


def run(args: argparse.Namespace) -> int:
    from limbo.commands.paths import check_output
    from limbo.episode.run_one import arun_episode
    from limbo.harnesses.mcp.any_client import ExternalAgent, ServedEpisode
    from limbo.log.runlock import WriterLock

    load_plugins(args)
    _check_port(args)
    cell = _cell(args)
    check_output(args.out, "--out", run=True)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {args.out}: {exc.strerror}") from None
    _refuse_other_kind(args.out)  # before the lock too: a refused directory gains no lock file
    lock = WriterLock(args.out, None)  # one writer, as for `limbo run`, for the whole episode
    lock.acquire()
    try:
        _refuse_other_kind(args.out)
        _refuse_recorded(args.out, cell.episode_id)
        serve = functools.partial(ServedEpisode, transport=args.transport, port=args.port,
                                  hold_s=args.time_scale * cell.timing.client_timeout_s or None)
        record = asyncio.run(arun_episode(cell, ExternalAgent(cell.model), make_harness=serve))
        _append(args.out, record, cell, args.transport)
    finally:
        lock.release()
    out = record["outcome"]
    print(f"limbo mcp: episode {cell.episode_id} recorded in {args.out}: termination "
          f"{out['termination']}, task_success {out['task_success']}, duplicate "
          f"{out['duplicate']}", file=sys.stderr)
    return 0


def _check_port(args: argparse.Namespace) -> None:
    """A port that cannot be served is the user's to fix, before the episode starts."""
    if args.transport != "http":
        if args.port:
            raise UsageError("--port is for --transport http (stdio needs no port)")
        return
    check_port(args.port, "--port")


def _refuse_other_kind(out: Path) -> None:
    """``limbo mcp`` records into a directory of its own kind: appending its episodes to a
    grid's run would change what that run holds (and replace its manifest)."""
    from limbo.log.store import MCP, kind_of, manifests, record_files

    found = manifests(out)
    for name, manifest in found.items():
        if kind_of(manifest) != MCP:
            grid = (manifest.get("grid") or {}).get("name", "?")
            raise UsageError(f"{out} holds the run of grid {grid!r} ({name}); limbo mcp "
                             f"records into a directory of its own: choose another --out")
    if not found and record_files(out):
        raise UsageError(f"{out} holds episode records but no manifest saying limbo mcp wrote "
                         f"them; choose another --out")


def _refuse_recorded(out: Path, episode_id: str) -> None:
    """An episode is recorded once per run directory: a second record of the same cell would
    count it twice."""
    from limbo.log.store import scan

    if episode_id in scan(out).ids:
        raise UsageError(f"{out} already holds episode {episode_id} (the same cell); use "
                         f"another --out, or another --seed or --instance")


def _append(out: Path, record: EpisodeRecord, cell: Any, transport: str) -> None:
    from limbo.base.provenance import provenance
    from limbo.base.runtime import now_iso
    from limbo.base.secrets import scrubber
    from limbo.log.store import (
        MCP,
        RecordWriter,
        encode,
        episodes_file,
        manifest_file,
        scan,
        write_manifest,
    )

    writer = RecordWriter(episodes_file(out, None))
    try:
        writer.write(encode(record, scrubber()))
    finally:
        writer.close()
    write_manifest(manifest_file(out, None), {
        "kind": MCP, "command": "limbo mcp", "episodes": len(scan(out).ids),
        "cell": cell.public(), "world": cell.world, "transport": transport, "ended_at": now_iso(),
        "last_episode": cell.episode_id, "design": _design(cell), **provenance()}, scrubber())


def _design(cell: Any) -> dict[str, Any]:
    """What the directory's records mean to a reader (no experiment: each episode is its own
    cell): every fault mode's family and the kinds of the tools the episode offered."""
    from limbo.experiments.design import log_design
    from limbo.sim.catalog import catalog
    from limbo.sim.tools import toolset
    from limbo.sim.worldfile.kit import kit

    tools = toolset(cell.contract, kit(cell.world).services)
    return log_design(catalog(), {name: spec.kind for name, spec in tools.items()})
