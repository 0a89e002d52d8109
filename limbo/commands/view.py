"""``limbo view RUN_DIR...``: the run report served on 127.0.0.1, following runs being written."""

from __future__ import annotations

import argparse
from pathlib import Path

from limbo.base.errors import UsageError
from limbo.commands import command_parser
from limbo.commands.common import builtin_design
from limbo.commands.report import prepare
from limbo.commands.tables import add_common


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "view")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--port", type=int, default=0,
                   help="port on 127.0.0.1 (default: any free port; the address is printed)")
    add_common(p)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: choose 0 (any free port) to 65535")
    for path in args.runs:
        if not path.exists():
            raise UsageError(f"{path} is neither a run directory nor a record file")
    prepare(args, "view")
    from limbo.analysis.report.serve import serve

    serve(args.runs, args.weights, args.port, lambda line: print(line, flush=True),
          builtin_design)
    return 0
