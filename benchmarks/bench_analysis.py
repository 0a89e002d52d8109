"""The paper's scale for analysis: load at least 25,930 episodes and produce every table.

    python benchmarks/bench_analysis.py [--runs RUN_DIR ...] [--repeat 3] [--baseline PYTHON]

Without ``--runs`` it first runs the built-in ``paper`` grid (every experiment — e1, e1s, e2,
e2k, e3, e3k, e5, e6 — over the reference policies in the minimal harness, two workers; 39,600
distinct episodes, whether or not the production harnesses are installed) into a temporary
directory: each table reads only
its own experiments' runs, so every experiment must be there for every table to have data. It then
prints, for each repeat, the time to load the records (fast path: cell and outcome only), the
time to build every table (fits included), their total, the CPU time of both (what the work
costs when other processes share the machine), and the wall time of the whole ``limbo tables``
command (interpreter start and imports included), by default and with ``--bootstrap 1000``
(every rate's bootstrap check and Table 4's Shapley shares: the shares are refitted per
replicate, which is most of that time). Target on a 2-core machine: load + all tables ≤ 5 s
by default, intervals clustered by world. With ``--baseline`` (the python of another checkout's
environment, see ``benchmarks/ab.py``) ``limbo tables`` also runs under both, alternated, and
prints the A/B ratio of its wall and CPU time (interpreter start and imports included).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ab import add_options, compare

PAPER_EPISODES = 25_930
MIX = ("paper",)  # 39,600 distinct episodes; every table has data


def generate(root: Path) -> list[Path]:
    limbo = str(Path(sys.executable).parent / "limbo")
    runs = []
    for grid in MIX:
        out = root / grid
        subprocess.run([limbo, "run", grid, "--harness", "minimal", "--out", str(out),
                        "--workers", "2", "--quiet"],
                       check=True, capture_output=True)
        runs.append(out)
    return runs


def once(runs: list[Path]) -> tuple[int, float, float, float, dict[int, float]]:
    """(episodes, load s, tables s, CPU s of both, s per table) — wall times; the CPU time
    is what the work costs when other processes share the machine."""
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load
    from limbo.analysis.tables import TABLES

    cpu, start = time.process_time(), time.perf_counter()
    loaded = load(runs)
    loaded_at = time.perf_counter()
    data = Data(loaded)
    per_table = {}
    for number, build in TABLES.items():
        begin = time.perf_counter()
        build(data)
        per_table[number] = time.perf_counter() - begin
    end = time.perf_counter()
    return (len(loaded.frame), loaded_at - start, end - loaded_at, time.process_time() - cpu,
            per_table)


def cli_wall(runs: list[Path], *options: str) -> float:
    limbo = str(Path(sys.executable).parent / "limbo")
    start = time.perf_counter()
    done = subprocess.run([limbo, "tables", *map(str, runs), *options], check=True,
                          capture_output=True, text=True)
    absent = done.stdout.count("No data")  # Tables 14 and 16 need --repeats and --precision
    if absent > 2:
        raise SystemExit(f"{absent} tables had no data: the benchmark must fill the paper's")
    return time.perf_counter() - start


def report(runs: list[Path], repeat: int, baseline: Path | None = None) -> None:
    import limbo.analysis.tables  # noqa: F401 - imports timed apart from the work

    totals, cpus = [], []
    for i in range(repeat):
        episodes, load_s, fit_s, cpu_s, per_table = once(runs)
        if episodes < PAPER_EPISODES:
            raise SystemExit(f"only {episodes} episodes loaded; need {PAPER_EPISODES}")
        totals.append(load_s + fit_s)
        cpus.append(cpu_s)
        slowest = sorted(per_table.items(), key=lambda kv: -kv[1])[:3]
        print(f"run {i + 1}: {episodes} episodes  load {load_s:5.2f} s  tables {fit_s:5.2f} s  "
              f"total {load_s + fit_s:5.2f} s  CPU {cpu_s:5.2f} s  (slowest: "
              + ", ".join(f"table {n} {s:.2f} s" for n, s in slowest) + ")")
    print(f"load + all tables: best {min(totals):.2f} s, median {statistics.median(totals):.2f} s"
          f" wall; CPU median {statistics.median(cpus):.2f} s (target <= 5 s)")
    print(f"`limbo tables` end to end (interpreter start and imports included): "
          f"{cli_wall(runs):.2f} s")
    print(f"`limbo tables --bootstrap 1000` end to end: {cli_wall(runs, '--bootstrap', '1000'):.2f}"
          f" s")
    compare("the tables", ["tables", *map(str, runs)], baseline, repeat)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", nargs="+", type=Path)
    add_options(parser)
    args = parser.parse_args()
    if args.runs:
        report(args.runs, args.repeat, args.baseline)
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(f"running grids {', '.join(MIX)} (reference policies, two workers) ...")
        report(generate(Path(tmp)), args.repeat, args.baseline)


if __name__ == "__main__":
    main()
