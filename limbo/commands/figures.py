"""``limbo figures``: regenerate the paper's figures 2–6 (PNG and SVG) from episode logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from limbo.commands.tables import add_common, add_regrade, load_data
from limbo.errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("figures", help="regenerate the paper's figures from episode logs")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--out", type=Path, default=Path("figures"),
                   help="where figure<N>.png/.svg go (default: ./figures)")
    add_common(p)
    add_regrade(p)


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file; name a directory")
    data = load_data(args, "figures")
    from limbo.analysis.figures import render_safely

    failed = False
    for number, files, why in render_safely(data, args.out):
        if files:
            print("\n".join(map(str, files)))
        else:
            failed = failed or why.startswith("could not")
            print(f"limbo: figure {number} not drawn: {why}", file=sys.stderr)
    return 1 if failed else 0
