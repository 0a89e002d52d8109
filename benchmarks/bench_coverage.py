"""Does a "95 %" rate interval hold the true rate 95 % of the time at the worlds the tables have?

    python benchmarks/bench_coverage.py [--replicates 4000] [--design 20 10-20 10 4-40 logit]

A seeded simulation. Each replicate is K worlds; world k has its own rate, drawn around the true
rate p with intra-world correlation ρ (the correlation of two episodes of one world), and m_k
episodes, each a success at the world's rate. For every K ∈ {6, 16, 30, 48}, ρ ∈ {0.1, 0.3,
0.5} and p ∈ {5, 10, 30, 50 %} it prints the share of replicates whose interval holds p — for
LIMBO's interval (``limbo.analysis.cluster.interval``, docs/analysis.md) and, in parentheses,
for the design-effect Wilson interval the tables printed before it (ρ estimated once, by ANOVA,
at the observed rate; z quantile) — then the mean width of both, in percentage points.

Designs (``--design``): ``20`` — 20 episodes in every world, world rates beta-distributed (the
model the issue's figures came from); ``10-20`` — m_k uniform on 10…20; ``10`` — 10 episodes
per world (the median world of the paper run's cells); ``4-40`` — m_k uniform on 4…40, a stress
for uneven worlds; ``logit`` — 20 episodes, world rates logit-normal with the same mean and ρ
(not the beta-binomial model the interval's ρ comes from).

Every cell draws from its own seed (design, K, ρ, p), so any cell can be recomputed alone
(tests/test_analysis_uncertainty_docs.py does, for the figures docs/analysis.md quotes). The
interval is evaluated for all replicates of a cell at once, in blocks.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import optimize, special
from scipy.stats import norm

SEED = 35
WORLDS = (6, 16, 30, 48)
ICCS = (0.1, 0.3, 0.5)
RATES = (0.05, 0.10, 0.30, 0.50)
DESIGNS = ("20", "10-20", "10", "4-40", "logit")
BLOCK = 500

Array = np.ndarray


def sizes(design: str, rng: np.random.Generator, replicates: int, worlds: int) -> Array:
    """Episodes per world, replicates × worlds."""
    if design in ("20", "logit"):
        return np.full((replicates, worlds), 20)
    if design == "10":
        return np.full((replicates, worlds), 10)
    low, high = (int(v) for v in design.split("-"))
    found: Array = rng.integers(low, high + 1, size=(replicates, worlds))
    return found


def world_rates(design: str, rng: np.random.Generator, rate: float, icc: float,
                shape: tuple[int, int]) -> Array:
    """Each world's rate: beta with mean ``rate`` and 1/(a + b + 1) = ``icc``, or (``logit``)
    logit-normal with the same mean and variance icc·rate·(1 − rate)."""
    if design != "logit":
        a, b = rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc
        beta: Array = rng.beta(a, b, size=shape)
        return beta
    centre, spread = _logit_normal(rate, icc)
    found: Array = special.expit(centre + spread * rng.standard_normal(shape))
    return found


def _logit_normal(rate: float, icc: float) -> tuple[float, float]:
    """(centre, spread) of a normal on the logit scale whose rates have this mean and ICC."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()

    def gaps(par: Array) -> list[float]:
        p = special.expit(par[0] + np.exp(par[1]) * nodes)
        mean = float((weights * p).sum())
        return [mean - rate, float((weights * p * p).sum() - mean * mean) / (rate * (1 - rate))
                - icc]

    found = optimize.fsolve(gaps, [float(special.logit(rate)), 0.0], xtol=1e-12)
    return float(found[0]), float(np.exp(found[1]))


def simulate(design: str, worlds: int, icc: float, rate: float,
             replicates: int) -> tuple[Array, Array]:
    """(successes, episodes) per world, replicates × worlds, from the cell's own seed."""
    key = [SEED, DESIGNS.index(design), worlds, round(icc * 10), round(rate * 100)]
    rng = np.random.default_rng(key)
    m = sizes(design, rng, replicates, worlds)
    hits: Array = rng.binomial(m, world_rates(design, rng, rate, icc, m.shape))
    return hits, m


def limbo_interval(hits: Array, m: Array) -> tuple[Array, Array]:
    from limbo.analysis import betabinomial as bb
    from limbo.analysis.cluster import interval

    n = m.sum(axis=1).astype(float)
    lo, hi, _ = interval(hits.sum(axis=1) / n, n, (m * m).sum(axis=1) / n,
                         np.full(len(n), m.shape[1]), bb.world_counts(hits, m))
    return lo, hi


def before_interval(hits: Array, m: Array) -> tuple[Array, Array]:
    """The interval the tables printed before: Wilson (z) on n / (1 + (m̃ − 1)·ρ), ρ the one-way
    ANOVA intra-cluster correlation clipped to [0, 1], 1 where it has no estimate."""
    y, m = hits.astype(float), m.astype(float)
    n, k = m.sum(1), m.shape[1]
    p = y.sum(1) / n
    pk = y / m
    msb = (m * (pk - p[:, None]) ** 2).sum(1) / (k - 1)
    msw = (m * pk * (1 - pk)).sum(1) / (n - k)
    m0 = (n - (m * m).sum(1) / n) / (k - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(msb + (m0 - 1) * msw > 0,
                       np.clip((msb - msw) / (msb + (m0 - 1) * msw), 0, 1), 1.0)
    n_eff = n / (1 + ((m * m).sum(1) / n - 1) * rho)
    z2 = norm.ppf(0.975) ** 2
    centre = (p + z2 / (2 * n_eff)) / (1 + z2 / n_eff)
    half = np.sqrt(z2 * (p * (1 - p) / n_eff + z2 / (4 * n_eff ** 2))) / (1 + z2 / n_eff)
    return (np.where(p <= 0, 0.0, np.clip(centre - half, 0, 1)),
            np.where(p >= 1, 1.0, np.clip(centre + half, 0, 1)))


def coverage(design: str, worlds: int, icc: float, rate: float, replicates: int,
             method: Callable[[Array, Array], tuple[Array, Array]]) -> tuple[float, float]:
    """(share of replicates whose interval holds ``rate``, mean width) of one cell."""
    hits, m = simulate(design, worlds, icc, rate, replicates)
    blocks = [method(hits[i:i + BLOCK], m[i:i + BLOCK]) for i in range(0, replicates, BLOCK)]
    lo, hi = (np.concatenate(part) for part in zip(*blocks, strict=True))
    return float(((lo <= rate) & (rate <= hi)).mean()), float((hi - lo).mean())


def row(design: str, worlds: int, icc: float, replicates: int) -> tuple[str, list[tuple]]:
    """One line of a design's table (K worlds, ρ, every rate) and, per rate, the (coverage,
    width) of LIMBO's interval and of the one before it."""
    found = [(coverage(design, worlds, icc, rate, replicates, limbo_interval),
              coverage(design, worlds, icc, rate, replicates, before_interval)) for rate in RATES]
    cells = " | ".join(f"{100 * now[0]:.1f} ({100 * old[0]:.1f})" for now, old in found)
    widths = " / ".join(f"{100 * now[1]:.0f} ({100 * old[1]:.0f})" for now, old in found)
    return f"| {worlds} | {icc:.1f} | {cells} | {widths} |", found


def table(design: str, replicates: int) -> None:
    print(f"\ndesign {design}: {describe(design)}; {replicates:,} replicates per cell")
    print("| worlds | ρ | " + " | ".join(f"{100 * p:.0f}%" for p in RATES)
          + " | width (pp), " + " / ".join(f"{100 * p:.0f}%" for p in RATES) + " |")
    print("| ---: | ---: |" + " ---: |" * (len(RATES) + 1))
    cells = []
    for worlds in WORLDS:
        for icc in ICCS:
            line, found = row(design, worlds, icc, replicates)
            print(line)
            cells += found
    ratios = [now[1] / old[1] for now, old in cells]
    print(f"lowest coverage: {100 * min(now[0] for now, _ in cells):.1f}% (before: "
          f"{100 * min(old[0] for _, old in cells):.1f}%); width against before: median "
          f"×{np.median(ratios):.2f}, range ×{min(ratios):.2f}–×{max(ratios):.2f}")


def describe(design: str) -> str:
    return {"20": "20 episodes per world, beta world rates",
            "10-20": "10–20 episodes per world (uniform), beta world rates",
            "10": "10 episodes per world, beta world rates",
            "4-40": "4–40 episodes per world (uniform), beta world rates",
            "logit": "20 episodes per world, logit-normal world rates"}[design]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=4000)
    parser.add_argument("--design", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    args = parser.parse_args()
    print("Coverage of the 95% rate interval, % of replicates: LIMBO's interval (the design-"
          "effect Wilson interval printed before). Seeded; every cell its own seed.")
    for design in args.design:
        cpu = time.process_time()
        table(design, args.replicates)
        print(f"CPU time of the design: {time.process_time() - cpu:.1f} s")


if __name__ == "__main__":
    main()
