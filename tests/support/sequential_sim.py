"""Sampling worlds until precise, simulated: the confidence sequence of ``limbo run
--precision`` against a fixed-n interval recomputed after every world.

The sequence is :class:`limbo.base.confseq.BettingCS`, computed here for many replicates at
once with numpy (the same arithmetic, step by step; :func:`same_as_shipped` checks the two
agree), so that thousands of sequences of hundreds of worlds take seconds. Worlds are drawn as
``tests/support/clustered_sim.py`` draws them: each world's rate from a beta distribution with
mean ``rate`` and intra-cluster correlation ``icc`` (a constant rate at ``icc`` 0), then its
``episodes`` outcomes; a world's observation is its share of events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student

from limbo.base.confseq import BET_CAP, GRID, BettingCS


def worlds(rng: np.random.Generator, reps: int, n: int, rate: float, icc: float,
           episodes: int) -> np.ndarray:
    """(reps, n) world observations in [0, 1]: events / episodes in each world."""
    if icc > 0:
        strength = (1 - icc) / icc
        p = rng.beta(rate * strength, (1 - rate) * strength, size=(reps, n))
    else:
        p = np.full((reps, n), rate)
    return rng.binomial(episodes, p) / episodes


def sequence(x: np.ndarray, alpha: float = 0.05, target: float | None = None,
             grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (reps, n): :class:`BettingCS` after every observation, vectorised."""
    reps, n = x.shape
    m = np.arange(grid + 1) / grid
    with np.errstate(divide="ignore"):
        cap_up = np.where(m > 0, BET_CAP / m, np.inf)
        cap_down = np.where(m < 1, BET_CAP / (1 - m), np.inf)
    up, down = np.zeros((reps, grid + 1)), np.zeros((reps, grid + 1))
    total, squares, mu_hat = np.zeros(reps), np.full(reps, 0.25), np.full(reps, 0.5)
    lo, hi = np.zeros(reps), np.ones(reps)
    out_lo, out_hi = np.empty((reps, n)), np.empty((reps, n))
    bound, half = math.log(1 / alpha), math.log(0.5)
    for i in range(n):
        t = i + 1
        variance = squares / t
        lam = (target / variance if target is not None else
               np.sqrt(2 * math.log(2 / alpha) / (variance * t * math.log(1 + t))))
        d = x[:, i][:, None] - m
        up += np.log1p(np.minimum(lam[:, None], cap_up) * d)
        down += np.log1p(-np.minimum(lam[:, None], cap_down) * d)
        total += x[:, i]
        squares += (x[:, i] - mu_hat) ** 2
        mu_hat = (0.5 + total) / (t + 1)
        capital = half + np.maximum(up, down)
        inside = capital < bound
        found = inside.any(axis=1)
        least = capital.argmin(axis=1)
        first = np.where(found, inside.argmax(axis=1), least)
        last = np.where(found, grid - inside[:, ::-1].argmax(axis=1), least)
        new_lo, new_hi = np.maximum(0.0, (first - 1) / grid), np.minimum(1.0, (last + 1) / grid)
        meets = (new_lo <= hi) & (new_hi >= lo)
        lo = np.where(meets, np.maximum(new_lo, lo), new_lo)
        hi = np.where(meets, np.minimum(new_hi, hi), new_hi)
        out_lo[:, i], out_hi[:, i] = lo, hi
    return out_lo, out_hi


def fixed_n(x: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): the t interval on the world observations, recomputed after every world (from
    the second on; the first is [0, 1]) — the right fixed-n interval for clustered data."""
    reps, n = x.shape
    t = np.arange(1, n + 1)
    mean = np.cumsum(x, axis=1) / t
    sq = np.cumsum(x * x, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.maximum(sq - t * mean * mean, 0.0) / (t - 1)
        q = np.where(t > 1, student.ppf(1 - alpha / 2, np.maximum(t - 1, 1)), np.inf)
        half = q * np.sqrt(var / t)
    half[:, 0] = np.inf
    return np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)


@dataclass(frozen=True)
class Coverage:
    """Shares of replicates whose interval held the true rate, and the worlds used."""

    every_world: float
    """…at every world from the first to the last (any stopping time is covered)."""
    at_stop: float
    """…when sampling stopped: at half-width ≤ target, or after the last world."""
    worlds: float
    """Mean worlds sampled until the stop."""


def coverage(lo: np.ndarray, hi: np.ndarray, rate: float, target: float,
             start: int = 1) -> Coverage:
    """How ``lo``/``hi`` (reps, n) cover ``rate`` from world ``start`` (1-based) on."""
    held = (lo <= rate) & (rate <= hi)
    narrow = (hi - lo) <= 2 * target
    narrow[:, :start - 1] = False
    stop = np.where(narrow.any(axis=1), narrow.argmax(axis=1), lo.shape[1] - 1)
    rows = np.arange(lo.shape[0])
    return Coverage(float(held[:, start - 1:].all(axis=1).mean()),
                    float(held[rows, stop].mean()), float((stop + 1).mean()))


def same_as_shipped(x: np.ndarray, target: float | None) -> float:
    """The largest difference in an interval end between :func:`sequence` and the shipped
    :class:`BettingCS`, over every replicate and world of ``x``."""
    lo, hi = sequence(x, target=target)
    worst = 0.0
    for r in range(x.shape[0]):
        cs = BettingCS(target=target)
        for i, value in enumerate(x[r]):
            cs.update(float(value))
            worst = max(worst, abs(cs.lo - lo[r, i]), abs(cs.hi - hi[r, i]))
    return worst
