"""``--precision`` on forked workers, old against new: ``examples/precision.toml`` sampled until
``dup:0.05`` with ``--workers 2`` (and, for scale, in one process), each run into a fresh
directory.

    python benchmarks/bench_rounds.py [--baseline PYTHON] [--repeat 5]

A precision run goes a round at a time (a few worlds per arm), so whatever a round pays to
start — forking its workers, their first episode — it pays every round: the figure to watch is
``--workers 2`` against one process on the same side. With ``--baseline`` (the python of another
checkout's environment, see ``benchmarks/ab.py``) each command runs under both, alternated, and
the A/B ratio is printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from ab import add_options, compare, fresh

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "precision.toml"


def main() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args()
    os.environ["LIMBO_HARNESS_DIR"] = "/nonexistent"  # the minimal harness only
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "precise"
        for workers in ("1", "2"):
            compare(f"--precision rounds, --workers {workers}",
                    ["run", str(EXAMPLE), "--precision", "dup:0.05", "--workers", workers,
                     "--quiet", "--out", str(out)], args.baseline, args.repeat, fresh(out))


if __name__ == "__main__":
    main()
