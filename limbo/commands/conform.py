"""``limbo conform``: does an MCP server keep its exactly-once promises? (docs/conform.md)

    limbo conform --upstream-cmd "python server.py shop.db" --probe "python dump.py shop.db" \\
        --time-scale 0.01 --out runs/conform --junit reports/conform.xml --require 1,2,3

No agent and no model: LIMBO is the MCP client. Each tool × property is checked through the
proxy's own session (its ledger and journal) and recorded as an episode of ``--out``; the
verdicts are printed as a table (``--json``: as JSON), written to ``--out``/conform.json, and
as JUnit with ``--junit``. Exit 1 when a ``--require``d property fails or stays unknown.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.commands import command_parser

ALL = list(range(1, 9))


def _numbers(text: str) -> list[int]:
    """``1,2,3`` as the property numbers it names."""
    try:
        found = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        found = []
    if not found or any(n not in ALL for n in found):
        raise argparse.ArgumentTypeError(f"{text!r}: give property numbers 1-8, comma-separated")
    return sorted(set(found))


def add_parser(sub: Any) -> None:
    """Register ``limbo conform`` on the CLI's subparsers."""
    p = command_parser(sub, "conform")
    up = p.add_argument_group("the server under test: exactly one of")
    up.add_argument("--upstream-cmd", metavar="\"CMD ARGS...\"",
                    help="start the server with this command and speak MCP over its stdio "
                         "(property 5 restarts it)")
    up.add_argument("--upstream-url", metavar="URL",
                    help="connect over streamable HTTP (this machine only, unless "
                         "--allow-remote)")
    p.add_argument("--upstream-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="an HTTP header for --upstream-url (repeatable; never written)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow an --upstream-url on another machine: conform writes for real")
    p.add_argument("--world", type=Path, metavar="FILE_OR_DIR",
                   help="a world file declaring the server's tools (proxy = true): which write, "
                        "their arguments, the reads that show their effects")
    p.add_argument("--tool", action="append", default=[], metavar="NAME",
                   help="check only this tool (repeatable); no other tool is called, but the "
                        "world file's reads that show effects")
    p.add_argument("--probe", metavar="\"CMD ARGS...\"",
                   help="a command printing the server's effects as JSON lines, run before and "
                        "after each check (e.g. a SQL query)")
    p.add_argument("--property", type=_numbers, default=ALL, metavar="N,...",
                   help="check only these properties (1-8; default all)")
    p.add_argument("--require", type=_numbers, default=[], metavar="N,...",
                   help="exit 1 when one of these properties fails or stays unknown for a tool")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="property 3's held timeout is the sandbox's 30 s times F (default 1)")
    p.add_argument("--key-delay", type=float, default=0.0, metavar="S",
                   help="property 5 waits S wall seconds before its repeat: a key lease "
                        "shorter than S fails it (default 0)")
    p.add_argument("--out", type=Path, required=True,
                   help="a new run directory: each check's episode, ledger and conform.json")
    p.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML to FILE")
    p.add_argument("--json", action="store_true", help="print the report as JSON, not a table")
    p.add_argument("--dry-run", action="store_true",
                   help="list the checks and their first arguments; call no tool")


def _options(args: argparse.Namespace) -> Any:
    from limbo.proxy.conform.runner import ConformOptions
    from limbo.proxy.redact import scrub_with
    from limbo.proxy.upstream import spec_of

    upstream = spec_of(args.upstream_cmd, args.upstream_url, args.upstream_header,
                       args.allow_remote)
    if not (math.isfinite(args.time_scale) and 0 < args.time_scale <= 100):
        raise UsageError("--time-scale must be a number above 0 and at most 100")
    if not (math.isfinite(args.key_delay) and 0 <= args.key_delay <= 86_400):
        raise UsageError("--key-delay must be between 0 and 86400 seconds")
    if args.world is not None and not args.world.exists():
        raise UsageError(f"--world {args.world}: no such file or directory")
    return ConformOptions(upstream, args.world, args.tool, args.probe, args.property, args.require,
                   args.out, args.time_scale, args.key_delay, args.dry_run,
                   scrub_with(upstream.secrets()), _again(args))


def _again(args: argparse.Namespace) -> list[str]:
    """The flags a reproducer repeats (header values masked: they are never written)."""
    out = (["--upstream-cmd", args.upstream_cmd] if args.upstream_cmd is not None
           else ["--upstream-url", args.upstream_url])
    for header in args.upstream_header:
        out += ["--upstream-header", header.partition(":")[0] + ": ..."]
    out += ["--allow-remote"] if args.allow_remote else []
    out += ["--world", str(args.world)] if args.world is not None else []
    return out + (["--probe", args.probe] if args.probe is not None else [])


def run(args: argparse.Namespace) -> int:
    from limbo.proxy.conform.report import junit, table

    opts = _options(args)
    if not opts.dry_run:
        _prepare(args.out)
    try:
        report = asyncio.run(_conform(opts, args.out))
    except UsageError as exc:  # its text may quote the upstream
        raise UsageError(opts.scrub(str(exc))) from None
    print(opts.scrub(report.dumps() if args.json else table(report)), end="")
    if args.junit is not None:
        junit(report, args.junit, opts.scrub)
    return 1 if report.failing() and not opts.dry_run else 0


async def _conform(opts: Any, out: Path) -> Any:
    from limbo.log.runlock import WriterLock
    from limbo.proxy.conform.runner import conform

    if opts.dry_run:
        return await conform(opts)
    lock = WriterLock(out, None)  # one writer, as for `limbo run` and `limbo proxy`
    lock.acquire()
    try:
        report = await conform(opts)
        (out / "conform.json").write_text(opts.scrub(report.dumps()), encoding="utf-8")
        return report
    finally:
        lock.release()


def _prepare(out: Path) -> None:
    """``--out`` is a new (or empty) directory: a conform run is its own."""
    from limbo.commands.paths import check_dir

    check_dir(out, "--out")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty: limbo conform records each run in a "
                         f"directory of its own")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc.strerror}") from None
