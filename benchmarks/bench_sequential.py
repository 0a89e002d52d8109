"""Does ``limbo run --precision`` keep its 95% when it looks after every world? A seeded
simulation of sampling worlds until precise, printed as a table.

    python benchmarks/bench_sequential.py [--reps 1000] [--worlds 400] [--episodes 10]
                                          [--target 0.05] [--seed 39]

For each true rate (5–50%) and intra-cluster correlation (ICC 0–0.5), ``--reps`` replicates
draw ``--worlds`` worlds one after another, each of ``--episodes`` episodes
(``tests/support/sequential_sim.py``: a world's rate from a beta distribution with the ICC, then
its episodes), and follow two intervals for the mean over worlds after every world:

* the confidence sequence of ``--precision`` (:class:`limbo.base.confseq.BettingCS`, bets aimed
  at the ``--target`` half-width, as the run uses it), from the first world;
* the fixed-n interval a table would print — the t interval on the world rates, the right
  interval for clustered data at any one n — recomputed at every peek from the 10th world on.

Columns: *every world* — the share of replicates whose interval held the true rate at every
peek (what any stopping rule needs); *at stop* — the share that held it when sampling stopped
under the rule ``--precision`` uses (half-width ≤ target, or the last world); *worlds* — the
mean worlds sampled until that stop. The sequence is checked against the shipped class first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.sequential_sim import coverage, fixed_n, same_as_shipped, sequence, worlds

RATES = (0.05, 0.10, 0.20, 0.30, 0.50)
ICCS = (0.0, 0.1, 0.3, 0.5)
PEEK_FROM = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--worlds", type=int, default=400)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    check = worlds(rng, 8, 150, 0.2, 0.3, args.episodes)
    print(f"vectorised sequence vs the shipped BettingCS, 8 × 150 worlds: largest difference "
          f"in an interval end {same_as_shipped(check, args.target):.1e}")
    print(f"{args.reps} replicates of {args.worlds} worlds × {args.episodes} episodes, target "
          f"half-width {args.target:g}, seed {args.seed}\n")
    print("| rate | ICC | CS: every world | CS: at stop | CS: worlds | fixed-n: every world "
          f"(from world {PEEK_FROM}) | fixed-n: at stop | fixed-n: worlds |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    started, worst = time.perf_counter(), 1.0
    for rate in RATES:
        for icc in ICCS:
            x = worlds(rng, args.reps, args.worlds, rate, icc, args.episodes)
            cs = coverage(*sequence(x, target=args.target), rate, args.target)
            fixed = coverage(*fixed_n(x), rate, args.target, start=PEEK_FROM)
            worst = min(worst, cs.every_world)
            print(f"| {100 * rate:.0f}% | {icc:.1f} | {100 * cs.every_world:.1f}% | "
                  f"{100 * cs.at_stop:.1f}% | {cs.worlds:.0f} | {100 * fixed.every_world:.1f}% | "
                  f"{100 * fixed.at_stop:.1f}% | {fixed.worlds:.0f} |", flush=True)
    print(f"\nlowest coverage of the confidence sequence at every world: {100 * worst:.1f}% "
          f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
