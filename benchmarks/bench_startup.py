"""Where a user waits on a command's start and on reading a run: ``limbo --help``, ``limbo list
services`` and ``limbo status`` on the paper run (39,600 episodes), old against new.

    python benchmarks/bench_startup.py [--run RUN_DIR] [--baseline PYTHON] [--repeat 5]

Without ``--run`` it first runs the ``paper`` grid in the minimal harness into a temporary
directory (two workers; production harnesses left out, as where none is installed). With
``--baseline`` (the python of another checkout's environment, see ``benchmarks/ab.py``) each
command runs under both, alternated, and the A/B ratio is printed. Targets on a quiet 2-core
machine: ``--help`` and ``list services`` at most 0.3 s, ``status`` at most 1 s.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ab import add_options, compare
from bench_analysis import generate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", type=Path, help="a run of the paper grid")
    add_options(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or generate(Path(tmp))[0]
        compare("start-up", ["--help"], args.baseline, args.repeat)
        compare("start-up", ["list", "services"], args.baseline, args.repeat)
        compare("reading a run", ["status", str(run)], args.baseline, args.repeat)


if __name__ == "__main__":
    main()
