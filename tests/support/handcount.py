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
