"""``limbo tables``: regenerate the paper's tables from episode logs.

Markdown to the terminal by default; with ``--out`` one file per table and format. Problems in
the input (unparseable lines, unknown schema versions, duplicate episodes, empty directories)
are reported one line each and the tables are built from everything else.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from limbo.base.errors import UsageError
from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, builtin_design

if TYPE_CHECKING:
    from limbo.analysis.data import Data
    from limbo.analysis.loader import Loaded
    from limbo.analysis.uncertainty import Uncertainty

FORMATS = ("md", "csv", "tex")
SUFFIX = {"md": "md", "csv": "csv", "tex": "tex"}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "tables")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories and/or episodes*.jsonl files (any mix)")
    p.add_argument("--out", type=Path, help="write table<N>.<format> files here")
    p.add_argument("--table", action="append", type=int, metavar="N",
                   help="only table N (repeatable; default: all)")
    p.add_argument("--format", default="md", help="comma-separated: md, csv, tex (default md)")
    add_common(p)
    add_world(p)
    add_uncertainty(p, "tables")
    add_regrade(p)


def add_regrade(p: argparse.ArgumentParser) -> None:
    """``--regrade``, for the commands that compute from the loaded grades (tables, figures)."""
    p.add_argument("--regrade", action="store_true",
                   help="grade every episode again with this LIMBO's grader (default: the grade "
                        "recorded when it ran); names both grader versions and lists the "
                        "episodes whose grade changed")


def add_common(p: argparse.ArgumentParser) -> None:
    """Options the tables and the figures share (and the report and view, which build both)."""
    p.add_argument("--weights", default="template", choices=("template", "instance", "none"),
                   help="Kish weights within each reported cell: equal per task template "
                        "(default), per task instance, or none")
    add_plugin_flag(p)


def add_uncertainty(p: argparse.ArgumentParser, command: str) -> None:
    """``--cluster`` and ``--bootstrap``: the tables, the figures and ``limbo compare``, each
    with its own default number of replicates (:mod:`limbo.analysis.replicates`)."""
    from limbo.analysis.replicates import REPLICATES

    replicates = REPLICATES[command]
    p.add_argument("--cluster", default="world", choices=("world", "template", "none"),
                   help="the unit of replication of every interval and test: the world "
                        "(template and instance; default), the task template, or none (every "
                        "episode its own unit)")
    p.add_argument("--bootstrap", type=replicates_arg, default=replicates, metavar="B",
                   help=f"cluster-bootstrap replicates for the intervals that have one "
                        f"(default {replicates}{': none' if not replicates else ''}; seeded)")


def replicates_arg(text: str) -> int:
    """A number of bootstrap replicates: 0 (none) or more, and not absurdly many."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= MAX_REPLICATES:
        raise argparse.ArgumentTypeError(f"{value}: choose 0 (none) to {MAX_REPLICATES:,}")
    return value


MAX_REPLICATES = 100_000


@contextlib.contextmanager
def uncertainty(args: argparse.Namespace) -> Iterator[Uncertainty]:
    """The unit and bootstrap the options chose; with a bootstrap on a terminal, a progress
    bar on stderr while the block runs (nothing into a pipe or a file).

    The bar is redrawn as the bootstrap reports, at most :data:`STEPS` times per table, not by
    rich's refresh thread: a process with a second thread cannot fork safely, and the tables
    are built beside a forked helper (:func:`~limbo.base.beside.in_turns`). The helper inherits
    the bar and redraws it too, for the tables it takes: the one line shows whichever process
    reported last, and a lock the two share keeps their redraws from interleaving."""
    from limbo.analysis.uncertainty import Uncertainty

    if not args.bootstrap or not sys.stderr.isatty():
        yield Uncertainty(args.cluster, args.bootstrap)
        return
    import multiprocessing

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("bootstrap {task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=Console(stderr=True), transient=True, auto_refresh=False) as bar:
        task, shown = bar.add_task("", total=args.bootstrap), [("", -1)]
        drawing = multiprocessing.Lock()

        def report(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)
            if (step := (what, done * STEPS // max(total, 1))) != shown[0]:
                shown[0] = step
                with drawing:
                    bar.refresh()

        yield Uncertainty(args.cluster, args.bootstrap, report)


STEPS = 100
"""How often a table's bootstrap bar is redrawn, at most: once per percent."""


def load_data(args: argparse.Namespace, command: str, u: Uncertainty) -> Data:
    """Check the extra, load plugins and the runs, report input problems; the Data, its
    uncertainty ``u``."""
    from limbo.analysis.deps import require

    require(command)
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load
    from limbo.base.registry import load_plugin

    for name in args.plugin:
        load_plugin(name)
    loaded = load(args.runs, builtin_design)
    # What the command loaded lives until it exits: out of the collector's generations, no
    # later collection walks it (a tenth of a second of CPU over the paper grid's tables).
    gc.freeze()
    for line in loaded.messages():
        print(f"limbo: warning: {line}", file=sys.stderr)
    print(f"limbo: {loaded.counts()}", file=sys.stderr)
    for line in loaded.notes():
        print(f"limbo: {line}", file=sys.stderr)
    if args.regrade:
        from limbo.analysis.regrade import regrade

        for line in regrade(loaded).lines():
            print(f"limbo: {line}", file=sys.stderr)
    return Data(loaded, args.weights, u, _world(loaded, args.world))


def add_world(p: argparse.ArgumentParser) -> None:
    """``--world``: which world's episodes the paper's tables and figures hold."""
    p.add_argument("--world", default="built-in", metavar="WORLD",
                   help="the world the paper's tables and figures hold: built-in (default) or "
                        "a loaded world file, by its name or name@digest (Table 0 and Figure 0 "
                        "show every world)")


def _world(loaded: Loaded, wanted: str) -> str:
    from limbo.analysis.population import choose_world

    try:
        return choose_world(loaded.frame, wanted)
    except ValueError as e:
        raise UsageError(str(e)) from None


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
    from limbo.analysis.tables import TABLES, build_beside

    numbers = sorted(set(args.table or TABLES))
    unknown = [n for n in numbers if n not in TABLES]
    if unknown:
        raise UsageError(f"no table {unknown[0]}; choose from {', '.join(map(str, TABLES))}")
    if args.out is not None:
        from limbo.commands.paths import check_output

        check_output(args.out, "--out")
        with writing(args.out):  # before the records load: an unwritable --out is the one line
            args.out.mkdir(parents=True, exist_ok=True)
    from limbo.analysis.loader import collector_paused

    with uncertainty(args) as u:
        data = load_data(args, "tables", u)
        with collector_paused():
            tables, failed = build_beside(data, numbers)
    for line in failed:
        print(f"limbo: error: {line}", file=sys.stderr)
    if args.out is None:
        for table in tables:
            for fmt in formats:
                print({"md": table.markdown, "csv": table.csv, "tex": table.latex}[fmt]())
    else:
        with writing(args.out):
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
