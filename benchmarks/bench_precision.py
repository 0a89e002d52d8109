"""How often does a ``--precision`` estimate land inside the full grid's interval? Must-show 2
of issue 39 on ``examples/precision.toml``, simulated and run.

    python benchmarks/bench_precision.py [--reps 2000] [--seed 39] [--seeds 40]

First ``--reps`` simulated replicates of the example's design (its ``policy/noisy`` arms and
worlds, two focal writes each, ``dup:0.05``;
``tests/support/precision_odds.py``): per arm, the mean worlds until the stop, the share of
replicates whose stopped estimate is inside the full grid's 95% interval (clustered by world,
as the tables print it) — beside the same for the mean of as many worlds chosen apart from
their outcomes, and the closed form P(|Z| ≤ 1.96 / √(W/n − 1)) — and the shares whose sequence
and whose full-grid interval hold the rate. Then the example run for real under grid seeds
0 .. ``--seeds`` − 1, the full grid and the precision run of each seed, one line per seed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.precision_odds import (
    EPISODES,
    EXAMPLE,
    RATES,
    WORLDS,
    against_full,
    odds,
    precision_facts,
)


def simulated(reps: int, seed: int) -> None:
    started = time.perf_counter()
    found = odds(np.random.default_rng(seed), reps)
    print(f"{reps} simulated replicates of examples/precision.toml (seed {seed}), dup:0.05:\n")
    print(f"| p_blind | worlds (of {WORLDS}) | inside | below | above | inside, n not chosen by "
          "the data | P(\\|Z\\| ≤ 1.96/√(W/n − 1)) | sequence holds p | full interval holds p |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for arm in found.arms:
        print(f"| {arm.rate:g} | {arm.worlds:.0f} | {100 * arm.inside:.1f}% | "
              f"{100 * arm.below:.1f}% | {100 * arm.above:.1f}% | {100 * arm.inside_fixed:.1f}% | "
              f"{100 * arm.formula:.1f}% | {100 * arm.held:.1f}% | {100 * arm.full_held:.1f}% |")
    print(f"\nboth arms inside: {100 * found.inside:.1f}%; episodes saved: "
          f"{100 * found.saving:.0f}% on average, under 30% in {100 * found.short:.1f}%; an arm "
          f"ran out of worlds in {100 * found.exhausted:.2f}% "
          f"({time.perf_counter() - started:.0f} s)")


def run(seeds: int) -> None:
    from limbo.cli import main

    print(f"\nexamples/precision.toml run under grid seeds 0-{seeds - 1}:\n")
    print(f"| seed | episodes (of {EPISODES:,}) | fewer | " + " | ".join(
        f"p_blind={rate:g}: worlds, estimate, full grid" for rate in RATES) + " |")
    print("| ---: | ---: | ---: |" + " --- |" * len(RATES))
    inside, reached, saved, held = 0, 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            full, precise = Path(tmp) / f"full{seed}", Path(tmp) / f"precise{seed}"
            base = ["run", str(EXAMPLE), "--seed", str(seed), "--quiet"]
            with contextlib.redirect_stdout(io.StringIO()):
                assert main([*base, "--out", str(full)]) == 0
                assert main([*base, "--precision", "dup:0.05", "--out", str(precise)]) == 0
            facts, arms = precision_facts(precise), against_full(full, precise)
            fewer = 1 - facts["episodes_run"] / facts["grid_episodes"]
            inside += all(a.inside for a in arms)
            reached += all(a.status == "reached" for a in arms)
            saved += fewer >= 0.3
            held += sum(a.held for a in arms)
            print(f"| {seed} | {facts['episodes_run']:,} | {100 * fewer:.0f}% | " + " | ".join(
                f"{a.worlds}{'' if a.status == 'reached' else ' ' + a.status}, "
                f"{100 * a.estimate:.1f} {'∈' if a.inside else '∉ (outside)'} "
                f"[{100 * a.lo:.1f}, {100 * a.hi:.1f}]" for a in arms) + " |", flush=True)
    print(f"\nboth estimates inside the full grid's intervals: {inside} of {seeds} seeds; both "
          f"arms reached ±0.05: {reached}; at least 30% fewer episodes: {saved}; the sequence "
          f"held the stated rate in {held} of {2 * seeds} arms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--seeds", type=int, default=40)
    args = parser.parse_args()
    if args.reps:
        simulated(args.reps, args.seed)
    if args.seeds:
        run(args.seeds)


if __name__ == "__main__":
    main()
