"""The paper grid as a user runs it: ``limbo run paper --workers 2`` in the minimal harness (no
production harness installed, so its 39,600 reference-policy episodes), timed as a whole
command — start-up, the worker pool, the writer and the summary — old against new.

    python benchmarks/bench_paper.py [--baseline PYTHON] [--repeat 5] [--workers 2]

With ``--baseline`` (the python of another checkout's environment, see ``benchmarks/ab.py``)
the two run alternately, each into a fresh run directory, and the A/B ratio of the medians is
printed with the load average before each run (the machine may be shared). Both sides' last
runs are then compared record by record (``tools/same_records.py``: the lines sorted, each
without its ``runtime``): a speed-up must not change a byte of what the grid records. Target
on a 2-core machine: at least 5,000 episodes/s with two workers, start-up included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from ab import Side, add_options, run_once, sides

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from same_records import stripped

EPISODES = 39_600
"""The paper grid's episodes that run without a production harness installed."""


def rate(side: Side) -> str:
    return (f"{EPISODES / statistics.median(side.walls):,.0f} episodes/s at the median wall, "
            f"{EPISODES / min(side.walls):,.0f} at the best")


def main() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    found = sides(args.baseline)
    loads: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"LIMBO_HARNESS_DIR": str(Path(tmp) / "no-harnesses")}  # missing: none installed
        outs = {side.name: Path(tmp) / side.name for side in found}
        for _ in range(args.repeat):
            for side in found:
                shutil.rmtree(outs[side.name], ignore_errors=True)
                loads.append(Path("/proc/loadavg").read_text().split(" ", 1)[0])
                run_once(side, ["run", "paper", "--workers", str(args.workers), "--quiet",
                                "--out", str(outs[side.name])], env)
        print(f"limbo run paper --workers {args.workers} ({args.repeat} runs per side, "
              f"alternated; load average before each run {', '.join(loads)}; "
              f"{os.cpu_count()} cores)")
        for side in found:
            print(f"  {side.line()}\n        {rate(side)}")
        if len(found) == 2:
            new, old = found
            print(f"  A/B new/old: wall {statistics.median(new.walls) / statistics.median(old.walls):.2f}"
                  f" (min {min(new.walls) / min(old.walls):.2f}), CPU "
                  f"{statistics.median(new.cpus) / statistics.median(old.cpus):.2f}")
            same = stripped(outs["new"]) == stripped(outs["old"])
            print(f"  records: {'byte-identical' if same else 'DIFFERENT'} apart from runtime "
                  f"(tools/same_records.py)")


if __name__ == "__main__":
    main()
