"""``limbo figures``: the summary (Figure 0) and the paper's figures 2–6 (PNG and SVG) from
episode logs; exit status 1 when none could be drawn."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from limbo.commands import command_parser
from limbo.commands.tables import (
    add_common,
    add_regrade,
    add_uncertainty,
    add_world,
    load_data,
    uncertainty,
    writing,
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "figures")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--out", type=Path, default=Path("figures"),
                   help="where figure<N>.png/.svg go (default: ./figures)")
    add_common(p)
    add_world(p)
    add_uncertainty(p, "figures")
    add_regrade(p)


def run(args: argparse.Namespace) -> int:
    from limbo.analysis.deps import require
    from limbo.commands.paths import check_output

    require("figures")
    check_output(args.out, "--out")
    with writing(args.out):  # before the records load: an unwritable --out is the one line
        args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    with uncertainty(args) as u:
        data = load_data(args, "figures", u)
        from limbo.analysis.figures import render_safely

        with writing(args.out):
            drawn = render_safely(data, args.out)
    for number, files, why in drawn:
        if files:
            print("\n".join(map(str, files)))
        else:
            failed = failed or why.startswith("could not")
            print(f"limbo: figure {number} not drawn: {why}", file=sys.stderr)
    if not any(files for _, files, _ in drawn):
        print(f"limbo: error: no figure drawn into {args.out} (each says why above)",
              file=sys.stderr)
        return 1
    return 1 if failed else 0
