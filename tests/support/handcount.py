"""Plain-Python reference computations for the analysis tests (no numpy, no project code):
what a reader would do by hand to check a table."""

from __future__ import annotations

import math


def mcnemar(b: int, c: int) -> float:
    """Exact McNemar p from the discordant counts."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment, in the input order."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def clustered_wilson(hits: list[bool], weights: list[float], clusters: list[object],
                     z: float = 1.959963984540054) -> tuple[float, float, float, float]:
    """(rate, lo, hi, n_eff): the weighted rate and the Wilson interval on Kish's n over the
    clustering design effect 1 + (m̃ − 1)·ρ, ρ the one-way ANOVA intra-cluster correlation of
    the unweighted outcomes (clipped to [0, 1]; 1 where it has no estimate) — reference/stats.md
    §8 written out by hand."""
    total = sum(weights)
    rate = sum(w for w, y in zip(weights, hits, strict=True) if y) / total
    kish = total * total / sum(w * w for w in weights)
    size: dict[object, int] = {}
    count: dict[object, int] = {}
    for y, k in zip(hits, clusters, strict=True):
        size[k] = size.get(k, 0) + 1
        count[k] = count.get(k, 0) + bool(y)
    n, k = len(hits), len(size)
    p = sum(count.values()) / n
    rho = 1.0
    if k >= 2 and n > k:
        msb = sum(m * (count[c] / m - p) ** 2 for c, m in size.items()) / (k - 1)
        msw = sum(m * (count[c] / m) * (1 - count[c] / m) for c, m in size.items()) / (n - k)
        m0 = (n - sum(m * m for m in size.values()) / n) / (k - 1)
        denom = msb + (m0 - 1) * msw
        if denom > 0:
            rho = min(1.0, max(0.0, (msb - msw) / denom))
    deff = 1 + (sum(m * m for m in size.values()) / n - 1) * rho
    n_eff = kish / deff
    centre = (rate + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z * math.sqrt(rate * (1 - rate) / n_eff + z * z / (4 * n_eff * n_eff)) / (
        1 + z * z / n_eff)
    lo = 0.0 if not any(hits) else max(0.0, centre - half)
    hi = 1.0 if all(hits) else min(1.0, centre + half)
    return rate, lo, hi, n_eff


def sign_flip(d: list[int]) -> float:
    """The sign-flip p of per-world net discordances ``d``: P(|Σ ±d_k| ≥ |Σ d_k|) over all
    2^G sign assignments, counted exactly (the distribution of the sum built world by world)."""
    ways: dict[int, int] = {0: 1}
    flips = [v for v in d if v]
    for v in flips:
        grown: dict[int, int] = {}
        for total, n in ways.items():
            for step in (v, -v):
                grown[total + step] = grown.get(total + step, 0) + n
        ways = grown
    t = abs(sum(flips))
    return sum(n for total, n in ways.items() if abs(total) >= t) / 2 ** len(flips)


def discordance(pairs: list[tuple[bool, bool, object]]) -> list[int]:
    """Per world, b_k − c_k of (outcome under A, outcome under B, world) pairs."""
    net: dict[object, int] = {}
    for a, b, world in pairs:
        net[world] = net.get(world, 0) + (a and not b) - (b and not a)
    return list(net.values())
