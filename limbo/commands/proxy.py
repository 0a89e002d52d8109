"""``limbo proxy``: LIMBO's faults and ledger in front of a team's own MCP server (docs/proxy.md).

    limbo proxy --upstream-cmd "python server.py" --world world.toml --fault timeout_post \\
        --out runs/proxy            # serves MCP on stdio; --listen PORT serves HTTP

One episode per invocation, recorded in ``--out`` like ``limbo mcp``'s. After a crash, the same
command with ``--recover`` reconciles and records the episodes the proxy left unrecorded.
Nothing is written to stdout in stdio mode except the protocol.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.sockets import check_port
from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, load_plugins
from limbo.commands.renamed import add_old_name


class _Help(argparse.HelpFormatter):
    """``limbo proxy --help``, ending with the fault modes (read from the proxy's own table
    only when help is shown: the CLI does not import the proxy to start)."""

    def format_help(self) -> str:
        from limbo.proxy.plan import modes

        return (super().format_help() + "\nfault modes (--fault MODE[@TOOL], docs/proxy.md): "
                + ", ".join(modes()) + "\n")


def add_parser(sub: Any) -> None:
    """Register ``limbo proxy`` on the CLI's subparsers."""
    p = command_parser(sub, "proxy", formatter_class=_Help)
    up = p.add_argument_group("the upstream (your MCP server): exactly one of")
    up.add_argument("--upstream-cmd", metavar="\"CMD ARGS...\"",
                    help="start the server with this command and speak MCP over its stdio")
    up.add_argument("--upstream-url", metavar="URL",
                    help="connect to the server over streamable HTTP (this machine only, unless "
                         "--allow-remote)")
    p.add_argument("--upstream-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="an HTTP header for --upstream-url (repeatable; values are never "
                        "written anywhere)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow an --upstream-url on another machine")
    p.add_argument("--world", type=Path, required=True, metavar="FILE_OR_DIR",
                   help="the world file (or directory) declaring the server's tools (proxy = "
                        "true)")
    template = p.add_argument("--template", dest="task", metavar="TEMPLATE",
                              help="the world file's template the agent is given (default: its "
                                   "only one)")
    add_old_name(p, "--task", template)
    p.add_argument("--instance", type=int, default=0, help="the task instance (default 0)")
    p.add_argument("--fault", default="none", metavar="MODE[@TOOL]",
                   help="the fault on the first call to TOOL (default: a write of the task, "
                        "drawn from the seed); default none; the modes are listed below")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seeds every draw of the fault plan (default 0)")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="every fault duration (the 30 s client timeout, the 90 s late commit, "
                        "...) and the wait for the upstream's answer (120 s) is the sandbox's "
                        "times F, in wall seconds (default 1)")
    p.add_argument("--listen", type=int, metavar="PORT",
                   help="serve streamable HTTP on 127.0.0.1:PORT (0: any free port) instead of "
                        "stdio")
    p.add_argument("--model", default="external/mcp-client",
                   help="a label for the agent's model in the record")
    p.add_argument("--out", type=Path, default=Path("runs/proxy"),
                   help="the run directory the episode is recorded in (default runs/proxy)")
    add_plugin_flag(p)
    p.add_argument("--recover", action="store_true",
                   help="do not serve: reconcile and record the episodes a stopped proxy left "
                        "unrecorded in --out")


def _options(args: argparse.Namespace) -> Any:
    from limbo.proxy.declared import load
    from limbo.proxy.episode import Options
    from limbo.proxy.redact import scrub_with
    from limbo.proxy.upstream import spec_of

    upstream = spec_of(args.upstream_cmd, args.upstream_url, args.upstream_header,
                       args.allow_remote)
    if not (math.isfinite(args.time_scale) and 0 < args.time_scale <= 100):
        raise UsageError("--time-scale must be a number above 0 and at most 100")
    if args.listen is not None:
        check_port(args.listen, "--listen")  # before the setup writes to the upstream
    if args.instance < 0:
        raise UsageError("--instance must be 0 or more")
    if not args.world.exists():
        raise UsageError(f"--world {args.world}: no such file or directory")
    return Options(load(args.world), upstream, args.out, args.fault, args.task, args.instance,
                   args.seed, args.time_scale, args.model, args.listen,
                   scrub_with(upstream.secrets()))


def run(args: argparse.Namespace) -> int:
    from limbo.commands.paths import check_dir
    from limbo.log.runlock import WriterLock
    from limbo.proxy import episode

    load_plugins(args)  # a plugin's fault mode is a mode like the built-ins
    opts = _options(args)
    check_dir(args.out, "--out")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {args.out}: {exc.strerror}") from None
    lock = WriterLock(args.out, None)  # one writer, as for `limbo run` and `limbo mcp`
    lock.acquire()
    try:
        _refuse_other_kind(args.out)
        if args.recover:
            for record, what in asyncio.run(episode.recover(opts)):
                _said(record, args.out, what)
        else:
            _said(asyncio.run(episode.run(opts)), args.out, "recorded")
    except UsageError as exc:  # its text may quote the upstream (an error it answered with)
        raise UsageError(opts.scrub(str(exc))) from None
    finally:
        lock.release()
    return 0


def _refuse_other_kind(out: Path) -> None:
    """The proxy records into a directory of its own: adding its episodes to a grid's run would
    change what that run holds."""
    from limbo.log.store import manifests, record_files
    from limbo.proxy.status import KIND

    found = manifests(out)
    for name, manifest in found.items():
        if manifest.get("kind") != KIND:
            raise UsageError(f"{out} holds another kind of run ({name}); limbo proxy records "
                             f"into a directory of its own: choose another --out")
    if not found and record_files(out):
        raise UsageError(f"{out} holds episode records but no manifest saying limbo proxy wrote "
                         f"them; choose another --out")


def _said(record: Mapping[str, Any], out: Path, what: str) -> None:
    o, proxy = record["outcome"], record["runtime"]["proxy"]
    dup = sum(proxy["duplicates"].values())
    print(f"limbo proxy: episode {record['episode_id']} {what} in {out}: termination "
          f"{o['termination']}, task_success {o['task_success']}, exactly_once "
          f"{o['exactly_once']}, duplicate {o['duplicate']}; ledger: {len(record['ledger'])} "
          f"effect(s), {dup} duplicate(s) by business key", file=sys.stderr)
