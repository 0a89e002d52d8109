"""``limbo compare``: pair the episodes of two runs (or two levels of one factor in one run)
and report paired differences per fault family: a cluster-bootstrap interval of each
difference, the sign-flip test over worlds (primary) and the exact McNemar test beside it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, builtin_design
from limbo.commands.tables import add_uncertainty, uncertainty
from limbo.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "compare")
    p.add_argument("run_a", type=Path, metavar="RUN_A",
                   help="a run directory, episodes*.jsonl file or Inspect log")
    p.add_argument("run_b", type=Path, metavar="RUN_B", nargs="?",
                   help="omit to compare two levels of --by within RUN_A")
    p.add_argument("--by", metavar="FACTOR[=A,B]",
                   help="the cell field that differs (default: inferred); with one run, the "
                        "factor whose two levels are compared")
    p.add_argument("--format", default="md", choices=("md", "csv"),
                   help="markdown tables (default) or CSV")
    add_uncertainty(p, "compare")
    add_plugin_flag(p)


def _load(path: Path, side: str, sources: list[str]) -> pd.DataFrame:
    """The episodes of one side; the runs they came from are added to ``sources``."""
    from limbo.analysis.loader import load

    loaded = load([path], builtin_design)
    for line in loaded.messages():
        print(f"limbo: warning: {side}: {line}", file=sys.stderr)
    sources += [f"{side}: {run.describe()}" for run in loaded.runs]
    return loaded.frame


def run(args: argparse.Namespace) -> int:
    from limbo.analysis.deps import require

    require("compare")
    from limbo.analysis import compare
    from limbo.base.registry import load_plugin

    for name in args.plugin:
        load_plugin(name)
    sources: list[str] = []
    if args.run_b is None:
        arms = compare.one_run(_load(args.run_a, "RUN_A", sources), args.by)
    else:
        arms = compare.two_runs(_load(args.run_a, "RUN_A", sources),
                                _load(args.run_b, "RUN_B", sources),
                                (str(args.run_a), str(args.run_b)), args.by)
    pairs = compare.paired(arms)
    if pairs.frame.empty:
        raise UsageError(f"no episode of {arms.name_a} pairs with one of {arms.name_b} on "
                         f"every field but {', '.join(arms.compared) or 'none'}; name the field "
                         f"that differs with --by")
    with uncertainty(args) as u:
        tables = (compare.metrics_table(arms, pairs, u), compare.pairing_table(arms, pairs))
    for table in tables:
        table.sources = sources
        text = table.markdown() if args.format == "md" else table.csv()
        print(text.replace("### Table 0: ", "### "))
    return 0
