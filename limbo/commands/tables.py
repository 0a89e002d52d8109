"""``limbo tables``: regenerate the paper's tables from episode logs.

Markdown to the terminal by default; with ``--out`` one file per table and format. Problems in
the input (unparseable lines, unknown schema versions, duplicate episodes, empty directories)
are reported one line each and the tables are built from everything else.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from limbo.base.errors import UsageError
from limbo.commands.common import add_plugin_flag, builtin_design

if TYPE_CHECKING:
    from limbo.analysis.data import Data

FORMATS = ("md", "csv", "tex")
SUFFIX = {"md": "md", "csv": "csv", "tex": "tex"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tables", help="regenerate the paper's tables from episode logs")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--out", type=Path, help="write table<N>.<format> files here")
    p.add_argument("--table", action="append", type=int, metavar="N",
                   help="only table N (repeatable; default: all)")
    p.add_argument("--format", default="md", help="comma-separated: md, csv, tex (default md)")
    add_common(p)
    add_regrade(p)


def add_regrade(p: argparse.ArgumentParser) -> None:
    """``--regrade``, for the commands that compute from the loaded grades (tables, figures)."""
    p.add_argument("--regrade", action="store_true",
                   help="grade every episode again with this LIMBO's grader (default: the grade "
                        "recorded when it ran); names both grader versions and lists the "
                        "episodes whose grade changed")


def add_common(p: argparse.ArgumentParser) -> None:
    """Options the tables and the figures share."""
    p.add_argument("--weights", default="template", choices=("template", "instance", "none"),
                   help="Kish weights within each reported cell: equal per task template "
                        "(default), per task instance, or none")
    add_plugin_flag(p)


def load_data(args: argparse.Namespace, command: str) -> Data:
    """Check the extra, load plugins and the runs, report input problems; the Data."""
    from limbo.analysis.deps import require

    require(command)
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load
    from limbo.base.registry import load_plugin

    for name in args.plugin:
        load_plugin(name)
    loaded = load(args.runs, builtin_design)
    for line in loaded.messages():
        print(f"limbo: warning: {line}", file=sys.stderr)
    print(f"limbo: {loaded.counts()}", file=sys.stderr)
    if args.regrade:
        from limbo.analysis.regrade import regrade

        for line in regrade(loaded).lines():
            print(f"limbo: {line}", file=sys.stderr)
    return Data(loaded, args.weights)


def _formats(text: str) -> list[str]:
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise UsageError(f"--format {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return chosen


def run(args: argparse.Namespace) -> int:
    formats = _formats(args.format)
    from limbo.analysis.deps import require

    require("tables")
    from limbo.analysis.tables import TABLES, build_safely

    numbers = sorted(set(args.table or TABLES))
    unknown = [n for n in numbers if n not in TABLES]
    if unknown:
        raise UsageError(f"no table {unknown[0]}; choose from {', '.join(map(str, TABLES))}")
    if args.out is not None:
        from limbo.commands.paths import check_output

        check_output(args.out, "--out")
    data = load_data(args, "tables")
    tables, failed = build_safely(data, numbers)
    for line in failed:
        print(f"limbo: error: {line}", file=sys.stderr)
    if args.out is None:
        for table in tables:
            for fmt in formats:
                print({"md": table.markdown, "csv": table.csv, "tex": table.latex}[fmt]())
    else:
        with writing(args.out):
            args.out.mkdir(parents=True, exist_ok=True)
            for table in tables:
                for fmt in formats:
                    path = args.out / f"table{table.number}.{SUFFIX[fmt]}"
                    path.write_text({"md": table.markdown, "csv": table.csv,
                                     "tex": table.latex}[fmt](), encoding="utf-8")
                    print(path)
    return 1 if failed else 0


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Writing into ``out``: a failure of the file system (a full disk, a directory that
    became read-only) is one line naming it, not a traceback."""
    try:
        yield
    except OSError as exc:
        raise UsageError(f"cannot write into --out {out}: {exc.strerror or exc}") from None
