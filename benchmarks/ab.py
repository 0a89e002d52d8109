"""Old and new side by side: one ``limbo`` command as a user runs it, under this checkout and
under a baseline checkout, alternated run by run so that both meet the same machine load.

    python benchmarks/bench_startup.py --baseline /tmp/base/.venv/bin/python

A baseline is any checkout with its own environment, e.g. today's main::

    git worktree add /tmp/base main
    python3 -m venv /tmp/base/.venv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/base/.venv/lib/python3.11/site-packages/deps.pth
    /tmp/base/.venv/bin/pip install --no-deps -e /tmp/base

(the ``.pth`` line lends it this environment's dependencies; ``--no-deps`` installs only its
``limbo``). Each figure is the whole command's wall time and CPU time (its processes', children
included), the minimum and median of the runs, with the load average before each run — the
machine may be shared.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Side:
    """One checkout's ``limbo`` and what it measured."""

    name: str
    limbo: Path
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.name:>4}: wall min {min(self.walls):6.2f} s, median "
                f"{statistics.median(self.walls):6.2f} s; CPU min {min(self.cpus):6.2f} s, "
                f"median {statistics.median(self.cpus):6.2f} s")


def add_options(parser: object) -> None:
    """``--baseline PYTHON`` and ``--repeat N`` on a benchmark's argument parser."""
    parser.add_argument("--baseline", type=Path, metavar="PYTHON",  # type: ignore[attr-defined]
                        help="the python of a baseline checkout's environment: each command "
                             "is run under both, alternated")
    parser.add_argument("--repeat", type=int, default=5,  # type: ignore[attr-defined]
                        help="runs of each command per side (default 5)")


def sides(baseline: Path | None) -> list[Side]:
    found = [Side("new", Path(sys.executable).parent / "limbo")]
    if baseline is not None:
        found.append(Side("old", baseline.parent / "limbo"))
    return found


def run_once(side: Side, argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """Run ``limbo argv`` under ``side``; its output (stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([str(side.limbo), *argv], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{side.name}: limbo {' '.join(argv)} failed: {done.stderr[-500:]}")
    side.walls.append(wall)
    side.cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return done.stdout


def compare(title: str, argv: Sequence[str], baseline: Path | None, repeat: int,
            before: Callable[[], None] = lambda: None) -> None:
    """Time ``limbo argv`` ``repeat`` times per side, alternating; print each side and the
    ratio new/old of the medians. ``before`` runs before every run (clearing an output)."""
    found = sides(baseline)
    loads = []
    for _ in range(repeat):
        for side in found:
            before()
            loads.append(os.getloadavg()[0])
            run_once(side, argv)
    print(f"{title}: limbo {' '.join(argv)}  ({repeat} runs per side, alternated; load "
          f"average before each run {min(loads):.2f}-{max(loads):.2f}, median "
          f"{statistics.median(loads):.2f}; {os.cpu_count()} cores)")
    for side in found:
        print("  " + side.line())
    if len(found) == 2:
        new, old = found
        print(f"  A/B new/old: wall {statistics.median(new.walls) / statistics.median(old.walls):.2f}"
              f" (min {min(new.walls) / min(old.walls):.2f}), CPU "
              f"{statistics.median(new.cpus) / statistics.median(old.cpus):.2f}")


def fresh(path: Path) -> Callable[[], None]:
    """A ``before`` that removes ``path`` (an output the command must find absent)."""
    return lambda: shutil.rmtree(path, ignore_errors=True)
