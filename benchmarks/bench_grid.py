"""The paper's scale: at least 25,930 reference-policy episodes through the grid runner, once
with one worker and once with two, into fresh run directories.

    python benchmarks/bench_grid.py [--episodes 25930] [--grid e1]

Prints episodes/s for each worker count and their ratio. Target on a 2-core machine: the whole
grid in at most 60 s of wall time with two workers.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from limbo.experiments.grid import expand, load_grid
from limbo.run.context import RunContext
from limbo.run.runner import run_cells

PAPER_EPISODES = 25_930


def cells_for(grid_name: str, episodes: int) -> list:
    grid = load_grid(grid_name)
    per_instance = max(1, len(expand(grid.model_copy(update={"instances": 1})).cells))
    grid = grid.model_copy(update={"instances": -(-episodes // per_instance)})
    return expand(grid).cells[:episodes]


def timed(cells: list, workers: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_cells(cells, RunContext(out=Path(tmp), workers=workers), {"bench": True})
        wall = time.perf_counter() - start
        assert result.ran == len(cells)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=PAPER_EPISODES)
    parser.add_argument("--grid", default="e1")
    args = parser.parse_args()
    cells = cells_for(args.grid, args.episodes)
    print(f"grid {args.grid}: {len(cells)} reference-policy episodes")
    walls = {}
    for workers in (1, 2):
        walls[workers] = timed(cells, workers)
        print(f"--workers {workers}: {walls[workers]:6.1f} s wall, "
              f"{len(cells) / walls[workers]:6.0f} episodes/s")
    print(f"speed-up with 2 workers: {walls[1] / walls[2]:.2f}x")


if __name__ == "__main__":
    main()
