"""``limbo report RUN_DIR... --out DIR``: the run report as a static site that opens from disk."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from limbo.commands import command_parser
from limbo.commands.common import builtin_design
from limbo.commands.tables import add_common, writing


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "report")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--out", type=Path, required=True,
                   help="the report folder (new, empty, or an earlier report to replace)")
    add_common(p)


def prepare(args: argparse.Namespace, command: str) -> None:
    """Check the extra and load plugins (shared with ``limbo view``)."""
    from limbo.analysis.deps import require
    from limbo.base.registry import load_plugin

    require(command)
    for name in args.plugin:
        load_plugin(name)


def run(args: argparse.Namespace) -> int:
    from limbo.analysis.report.write import check_out
    from limbo.commands.paths import check_output

    check_output(args.out, "--out")
    check_out(args.out)
    prepare(args, "report")
    from limbo.analysis.report.forked import workers
    from limbo.analysis.report.site import build
    from limbo.analysis.report.write import write_site

    site = build(args.runs, args.weights, fallback=builtin_design, workers=workers())
    for line in site.loaded.messages() if site.loaded else []:
        print(f"limbo: warning: {line}", file=sys.stderr)
    with writing(args.out):
        size = write_site(site, args.out)
    print(f"{args.out / 'index.html'}  ({site.episodes} episodes, {size / 1e6:.1f} MB)")
    return 0
