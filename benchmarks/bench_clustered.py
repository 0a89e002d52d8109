"""The clustered statistics at the paper's scale: what each costs on 25,930 episodes.

    python benchmarks/bench_clustered.py [--worlds 500] [--replicates 1000] [--repeat 3]

Builds a seeded synthetic frame of 25,930 episodes in ``--worlds`` worlds with the factor
levels of Table 4 (contract 3, mode 4, model 6, harness 2; outcome rate 5–35% by contract and
model, worlds differing) and prints, for each repeat, the wall time of: the world-clustered
rate of every model × mode × contract cell; a cluster bootstrap of one rate and of a paired
difference (``--replicates``); the bootstrap of the four Shapley shares; the sign-flip test with
one discordant world in two (Monte Carlo, 100,000 flips); and the bias-reduced GEE. The machine
is shared, so the CPU time of the whole repeat is printed beside the wall times.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

EPISODES = 25_930
FACTORS = ["contract", "mode", "model", "harness"]


def frame(worlds: int) -> pd.DataFrame:
    rng = np.random.default_rng(26)
    rows = pd.DataFrame({
        "world": rng.integers(0, worlds, EPISODES),
        "contract": rng.choice(["keyed", "no key, strong read", "no key, no read"], EPISODES),
        "mode": rng.choice(["timeout_post", "http500_post", "timeout_late", "redelivery"],
                           EPISODES),
        "model": rng.choice([f"m{i}" for i in range(6)], EPISODES),
        "harness": rng.choice(["minimal", "guard"], EPISODES)})
    base = 0.05 + 0.2 * (rows["contract"] == "no key, no read") + 0.1 * (rows["model"] == "m0")
    world_shift = rng.normal(0, 0.08, worlds)[rows["world"]]
    rows["dup"] = rng.random(EPISODES) < np.clip(base + world_shift, 0, 1)
    rows["other"] = rng.random(EPISODES) < np.clip(base + world_shift + 0.02, 0, 1)
    return rows


def timed(label: str, work: Callable[[], object]) -> None:
    start = time.perf_counter()
    work()
    print(f"  {label:<46} {time.perf_counter() - start:7.3f} s")


def once(rows: pd.DataFrame, replicates: int) -> None:
    from limbo.analysis import bootstrap as bs
    from limbo.analysis.cluster import clustered_rate
    from limbo.analysis.gee import gee_clustered
    from limbo.analysis.paired import sign_flip

    worlds = rows["world"].to_numpy()
    cells = list(rows.groupby(["model", "mode", "contract"], observed=True))
    timed(f"clustered rate of {len(cells)} cells",
          lambda: [clustered_rate(c["dup"], c["world"]) for _, c in cells])
    timed(f"bootstrap of one rate, B={replicates}",
          lambda: bs.bootstrap_sums(bs.mean_sums(rows["dup"], worlds), bs.ratio,
                                    replicates=replicates))
    diff = rows["other"].to_numpy(float) - rows["dup"].to_numpy(float)
    timed(f"bootstrap of a paired difference, B={replicates}",
          lambda: bs.bootstrap_sums(bs.mean_sums(diff, worlds), bs.ratio, replicates=replicates))
    timed(f"bootstrap of the Shapley shares, B={replicates}",
          lambda: bs.cluster_bootstrap(rows, "world", bs.shapley_statistic(rows, FACTORS, "dup"),
                                       replicates=replicates))
    d = np.random.default_rng(3).integers(-2, 3, rows["world"].nunique())
    timed(f"sign flip, {int((d != 0).sum())} discordant worlds", lambda: sign_flip(d))
    x = (rows["contract"] == "no key, no read").to_numpy(float)
    timed("bias-reduced GEE (groups = world)",
          lambda: gee_clustered(rows["dup"].to_numpy(float), x, worlds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, default=500)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = frame(args.worlds)
    import limbo.analysis.bootstrap
    import limbo.analysis.gee  # noqa: F401 - imports timed apart from the work

    for i in range(args.repeat):
        print(f"run {i + 1}: {len(rows)} episodes in {rows['world'].nunique()} worlds")
        cpu = time.process_time()
        once(rows, args.replicates)
        print(f"  {'CPU time of the repeat':<46} {time.process_time() - cpu:7.3f} s")


if __name__ == "__main__":
    main()
