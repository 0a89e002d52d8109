"""The grid's cost per episode in machine instructions, old against new: an A/B that the
machine's load cannot move.

    python benchmarks/bench_instructions.py [--baseline PYTHON] [--episodes 300] [--grid paper]

On a shared machine two timed runs of one build differ by 5-10%, more than most single
changes to the episode path gain, so a timed A/B cannot tell them apart. Valgrind's callgrind
counts the instructions a process executes, which load, frequency and the hypervisor do not
change: two runs of one build agree to within about 0.5%. Each side runs the same cells (a
fixed sample of the grid's minimal-harness cells, written once by this side) twice under
callgrind, once with ``--episodes`` more than the other; the difference over that many episodes is the
cost of one episode — building, driving, settling, grading and encoding its record — with
start-up and imports cancelled out. ``PYTHONHASHSEED`` is fixed, so set and dict layouts are
too. The two sides run at once, one per core.

Instructions are not time (a cache miss costs more than an add), so this complements
``bench_paper.py``, which times the whole command; it is what to read when judging one change.
Needs ``valgrind`` on the PATH; about a minute per side on a 2-core machine at 300 episodes.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FEW = 20
"""Episodes of the shorter run: enough to warm every cache both runs share."""


def sample(grid: str, size: int, out: Path) -> None:
    """Every k-th of the grid's cells in id order (the minimal harness only: no production
    harness runs here), as JSON, so that the baseline runs exactly these cells."""
    os.environ["LIMBO_HARNESS_DIR"] = str(out.parent / "no-harnesses")
    from limbo.experiments.grid import iter_cells, load_grid

    cells = sorted(iter_cells(load_grid(grid)), key=lambda c: c.episode_id)
    step = max(1, len(cells) // size)
    chosen = [c.model_dump(mode="json", exclude={"transport"}) for c in cells[::step][:size]]
    out.write_text(json.dumps(chosen))


def drive(cells_file: Path, count: int) -> None:
    """Run the first ``count`` cells of ``cells_file`` and encode their records (the child)."""
    from limbo.episode.run_one import arun_episode
    from limbo.log.store import encode
    from limbo.sim.cell import Cell

    cells = [Cell(**c) for c in json.loads(cells_file.read_text())[:count]]
    for cell in cells:
        _ = cell.episode_id  # computed by the parent's plan in a real run, not by the episode

    async def run() -> None:
        for cell in cells:
            encode(await arun_episode(cell))

    # As a worker does before its episodes (limbo.run.local.freeze_heap): what is alive now is
    # out of the collector's sight. Without it the count included full collections over the
    # modules' objects, which a change to what is built at import moved by about 2 %.
    gc.freeze()
    asyncio.run(run())


def instructions(python: Path, cells_file: Path, count: int) -> int:
    """Instructions executed by ``python`` driving ``count`` episodes, start-up included."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(python),
         __file__, "--drive", str(cells_file), str(count)],
        capture_output=True, text=True, cwd=cells_file.parent,
        env={**os.environ, "PYTHONHASHSEED": "0",
             "LIMBO_HARNESS_DIR": str(cells_file.parent / "no-harnesses")})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{python}: the episodes failed under valgrind:\n{done.stderr[-800:]}")
    return int(found.group(1))


def per_episode(python: Path, cells_file: Path, episodes: int) -> float:
    few = instructions(python, cells_file, FEW)
    many = instructions(python, cells_file, FEW + episodes)
    return (many - few) / episodes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, metavar="PYTHON",
                        help="the python of a baseline checkout's environment (benchmarks/ab.py)")
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--grid", default="paper")
    parser.add_argument("--drive", nargs=2, metavar=("CELLS", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive(Path(args.drive[0]), int(args.drive[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: this benchmark counts instructions with it")
    with tempfile.TemporaryDirectory() as tmp:
        cells_file = Path(tmp) / "cells.json"
        sample(args.grid, FEW + args.episodes, cells_file)
        sides = {"new": Path(sys.executable)}
        if args.baseline is not None:
            sides["old"] = args.baseline
        with ThreadPoolExecutor(len(sides)) as pool:
            counts = dict(zip(sides, pool.map(
                lambda py: per_episode(py, cells_file, args.episodes), sides.values()),
                strict=True))
    print(f"instructions per episode, grid {args.grid} (minimal harness), {args.episodes} "
          f"episodes after {FEW} (PYTHONHASHSEED=0; callgrind)")
    for name, count in counts.items():
        print(f"  {name}: {count / 1e6:.3f} M  ({sides[name]})")
    if len(counts) == 2:
        print(f"  A/B new/old: {counts['new'] / counts['old']:.3f}")


if __name__ == "__main__":
    main()
