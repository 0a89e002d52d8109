"""The Ray executor against local workers, on a two-node Ray cluster started on 127.0.0.1 (a
head and one extra node, one CPU each: the same two slots as ``--workers 2``).

    python benchmarks/bench_ray.py [--episodes 3850] [--model-episodes 512] [--latency 0.5]
        [--concurrency 32] [--repeat 2]

1. Reference-policy episodes (CPU-bound, ~1 ms each): ``limbo run default`` with
   ``--workers 2`` and with ``--executor ray``; episodes/s of each, their ratio, and the
   per-cell overhead of Ray: the extra worker time per cell, ``2 * (ray wall - local wall) /
   episodes`` (both have two slots).
2. Real-model-shaped episodes: ``--model-episodes`` episodes through the OpenAI SDK against a
   paced loopback endpoint (``tests/support/paced.py``, in its own process) that answers
   every call after ``--latency`` seconds (two calls an episode), ``--concurrency`` episodes in
   flight per worker or per Ray task; the wall time of each executor.

Walls are the runs' own (``limbo run`` says ``in N s``: from the first cell to the last
record, Ray's worker start-up included, the connection to the cluster not), each the best of
``--repeat``, and the whole command's; the records file is watched to tell the start-up (the
first record) from the steady rate after it. Prints figures, asserts nothing; on a shared
machine they move with the other load.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]  # the paced endpoint, the test cluster

from bench_providers import endpoint  # noqa: E402
from support.paced import Pace  # noqa: E402
from support.ray_cluster import Cluster  # noqa: E402

LIMBO = str(Path(sys.executable).parent / "limbo")
PER_INSTANCE = 3850
"""Cells of the default grid per instance (3,850 at its one instance)."""
ENV = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}


@dataclass
class Timed:
    run: float
    """The run's own wall (``limbo run`` says ``in N s``)."""
    command: float
    first: float
    """From the command's start to its first record on disk."""
    steady: float
    """Episodes/s from the first record to the last."""


def timed(argv: list[str]) -> Timed:
    """One ``limbo run`` into a fresh directory, its records file watched as it grows."""
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "run" / "episodes.jsonl"
        start = time.perf_counter()
        proc = subprocess.Popen([LIMBO, *argv, "--out", str(records.parent), "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=ENV)
        first = last = None
        while proc.poll() is None:
            if first is None and records.exists() and records.stat().st_size:
                first, at_first = time.perf_counter(), records.read_bytes().count(b"\n")
            time.sleep(0.02)
        out, err = proc.communicate()
        last = time.perf_counter()
        total = records.read_bytes().count(b"\n") if records.exists() else 0
    if proc.returncode != 0 or first is None:
        raise SystemExit(f"limbo {' '.join(argv)} failed:\n{err}")
    said = re.search(r"episodes, .* in ([0-9.]+)s", out)
    run = float(said.group(1)) if said else last - start
    return Timed(run, last - start, first - start, (total - at_first) / max(last - first, 1e-9))


def best(argv: list[str], repeat: int) -> Timed:
    return min((timed(argv) for _ in range(repeat)), key=lambda t: t.run)


def _line(name: str, t: Timed, episodes: int) -> str:
    return (f"  {name:15s} {t.run:6.2f} s run ({episodes / t.run:5.0f} episodes/s), "
            f"{t.command:6.2f} s command, first record at {t.first:5.2f} s, then "
            f"{t.steady:5.0f} episodes/s")


def reference_policies(address: str, episodes: int, repeat: int) -> float:
    grid = ["run", "default", "--instances", str(-(-episodes // PER_INSTANCE)),
            "--limit", str(episodes)]
    local = best([*grid, "--workers", "2"], repeat)
    ray = best([*grid, "--executor", "ray", "--ray-address", address], repeat)
    print(f"reference policies, {episodes} episodes:")
    print(_line("--workers 2", local, episodes))
    print(_line("--executor ray", ray, episodes))
    overhead = 2 * (ray.run - local.run) / episodes
    steady = 2 * (1 / ray.steady - 1 / local.steady)
    print(f"  per-cell overhead of Ray: {1000 * overhead:.2f} ms of worker time per cell over "
          f"the whole run, {1000 * steady:.2f} ms once the first records are in")
    print(f"  ratio Ray / --workers 2 (episodes/s): {local.run / ray.run:.2f} over the run, "
          f"{ray.steady / local.steady:.2f} once the first records are in")
    return local.run / ray.run


def model_shaped(address: str, episodes: int, latency: float, concurrency: int,
                 repeat: int) -> float:
    with endpoint(Pace(latency_s=latency)) as url:
        spec = f"openai/paced?api=chat&base_url={url}/v1"
        grid = ["run", "default", "--model", spec, "--instances", "4", "--limit",
                str(episodes), "--concurrency", str(concurrency), "--no-cache"]
        local = best([*grid, "--workers", "2"], repeat)
        ray = best([*grid, "--executor", "ray", "--ray-address", address], repeat)
    ideal = episodes * 2 * latency / (2 * concurrency)
    print(f"model-shaped, {episodes} episodes x 2 calls, {latency:g} s latency, "
          f"--concurrency {concurrency} per slot (ideal {ideal:.1f} s):")
    print(_line("--workers 2", local, episodes))
    print(_line("--executor ray", ray, episodes))
    verdict = "at least as fast" if ray.run <= local.run else "slower"
    print(f"  Ray / local run wall: {ray.run / local.run:.2f} ({verdict}); once the first "
          f"records are in, Ray / local episodes/s: {ray.steady / local.steady:.2f}")
    return local.run / ray.run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=3850)
    parser.add_argument("--model-episodes", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    start = time.perf_counter()
    with Cluster(cpus=1, extra=1) as cluster:
        print(f"two-node Ray cluster at {cluster.address} up in "
              f"{time.perf_counter() - start:.1f} s", flush=True)
        cpu = reference_policies(cluster.address, args.episodes, args.repeat)
        io = model_shaped(cluster.address, args.model_episodes, args.latency,
                          args.concurrency, args.repeat)
    print(f"closing note: episodes/s of the Ray executor over --workers 2 on this machine: "
          f"{cpu:.2f}x for reference policies, {io:.2f}x for model-shaped episodes "
          f"({'at least as fast' if io >= 1 else 'slower'})")


if __name__ == "__main__":
    main()
