"""Throughput of the sandbox: episodes per second over the default grid, and the median
overhead of one tool call through the boundary (validation → fault wrapper → endpoint).

    python benchmarks/bench_episodes.py [--episodes N]

Prints figures; asserts nothing (tests never time anything).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from limbo.episode.run_one import arun_episode
from limbo.experiments.grid import expand, load_grid
from limbo.log.store import dumps
from limbo.sim.world import World


async def _episodes(cells: list) -> None:
    for cell in cells:
        dumps(await arun_episode(cell))


def episodes_per_second(n: int) -> tuple[int, float]:
    cells = expand(load_grid("default")).cells
    cells = (cells * (n // len(cells) + 1))[:n]
    start = time.perf_counter()
    asyncio.run(_episodes(cells))
    return len(cells), len(cells) / (time.perf_counter() - start)


def tool_call_overhead(samples: int = 2000) -> float:
    """Median wall time of one read call through the boundary, in microseconds."""
    cell = expand(load_grid("default")).cells[0]
    world = World.of(cell)
    timings = []
    for _ in range(samples):
        start = time.perf_counter()
        world.boundary.call("billing_list_charges", {"customer_id": "cus_101", "limit": 5})
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=3000)
    args = parser.parse_args()
    n, rate = episodes_per_second(args.episodes)
    print(f"episodes: {n}  throughput: {rate:.0f} episodes/s (one process, records serialised)")
    print(f"median tool-call overhead: {tool_call_overhead():.1f} µs per call")


if __name__ == "__main__":
    main()
