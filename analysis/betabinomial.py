"""The intra-world correlation a rate's interval needs, re-estimated at every candidate rate.

A world's episodes go together, and how much they do — the intra-cluster correlation ρ —
decides how wide a rate's interval must be. Estimated once, at the observed rate, ρ is least
reliable exactly where it matters: a rare outcome seen in two of sixteen worlds looks like
little clustering, and the interval is too short on the side the truth lies (under 85 %
coverage at 16 worlds, ρ = 0.3, a 5 % rate: benchmarks/bench_coverage.py). Wilson's interval for a plain proportion already asks, of
each candidate rate μ, whether the data would be surprising *if μ were true*, with the variance
μ(1 − μ)/n of that hypothesis. This module gives the clustered version its missing piece: ρ̃(μ),
the intra-world correlation that makes the observed per-world counts most likely when the rate
is μ (the beta-binomial model's maximum likelihood at a fixed mean). Far from the data, only
strong clustering explains them, ρ̃ grows, and the interval reaches as far as it must.

The beta-binomial log-likelihood of per-world counts (y_k successes of m_k) at mean μ and
γ = ρ / (1 − ρ) is written with the counts summarised once per cell,

    ℓ(μ, γ) = Σ_i [a_i log(μ + iγ) + b_i log(1 − μ + iγ) − c_i log(1 + iγ)],

a_i, b_i, c_i the worlds with more than i successes, failures, episodes: finite at ρ = 0 (the
binomial), exact (no difference of large log-gammas), and smooth in u = log γ, where ρ̃ is
found — a grid locates the maximum, a safeguarded Newton iteration finishes it to machine
precision. Everything works on a leading axis of cells, so a coverage simulation evaluates
thousands of cells at once; a table asks for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray
GRID = np.concatenate([[-30.0], np.arange(-12.0, 20.0, 1.5)])
"""u = log γ = logit ρ where ρ̃ is first looked for: ρ from 1e-13 (nothing) to 1 − 3e-9."""
CHUNK = 1 << 20
"""Points × the largest world evaluated at once (≤ 8 MB an array): a cell whose worlds hold
thousands of episodes (``--cluster template``) is worked through in pieces."""
FLAT = -30.0
"""u at or below which ρ̃ counts as 0: its design effect differs from 1 by (m̃ − 1)·1e-13."""


@dataclass(frozen=True)
class WorldCounts:
    """Per cell (leading axis), the summary of its worlds' counts the likelihood needs."""

    above: Array
    """a_i: worlds with more than i successes (cells × L, L the largest world)."""
    below: Array
    """b_i: worlds with more than i failures."""
    sizes: Array
    """c_i: worlds with more than i episodes."""

    @property
    def steps(self) -> Array:
        steps: Array = np.arange(self.sizes.shape[-1], dtype=float)
        return steps


def world_counts(hits: Array, sizes: Array) -> WorldCounts:
    """The summary of ``hits`` successes in ``sizes`` episodes per world (cells × worlds; a
    world of size 0 is absent)."""
    hits, sizes = np.atleast_2d(hits).astype(int), np.atleast_2d(sizes).astype(int)
    steps = np.arange(max(int(sizes.max(initial=0)), 1))

    def more_than(values: Array) -> Array:
        counted: Array = (values[..., None] > steps).sum(axis=-2).astype(float)
        return counted

    return WorldCounts(more_than(hits), more_than(sizes - hits), more_than(sizes))


def _chunked(function: Any) -> Any:
    """``function(mu, u, counts)`` over the points axis in pieces of at most CHUNK values."""
    def over(mu: Array, u: Array, counts: WorldCounts) -> Any:
        width = max(1, CHUNK // max(1, len(mu) * counts.sizes.shape[-1]))
        if mu.shape[-1] <= width:
            return function(mu, u, counts)
        parts = [function(mu[:, i:i + width], u[:, i:i + width], counts)
                 for i in range(0, mu.shape[-1], width)]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(p, axis=-1) for p in zip(*parts, strict=True))
        return np.concatenate(parts, axis=-1)

    return over


@_chunked
def _llf(mu: Array, u: Array, counts: WorldCounts) -> Array:
    """ℓ at (μ, u), both cells × points; u = −inf is the binomial (ρ = 0)."""
    step = counts.steps * np.exp(u)[..., None]
    a, b, c = (x[:, None, :] for x in (counts.above, counts.below, counts.sizes))
    with np.errstate(divide="ignore", invalid="ignore"):  # μ = 0 where no world succeeded
        terms = (np.where(a > 0, a * np.log(mu[..., None] + step), 0.0)
                 + np.where(b > 0, b * np.log(1 - mu[..., None] + step), 0.0))
    llf: Array = (terms - c * np.log1p(step)).sum(-1)
    return llf


@_chunked
def _slopes(mu: Array, u: Array, counts: WorldCounts) -> tuple[Array, Array, Array]:
    """∂ℓ/∂u, ∂²ℓ/∂u² and ∂²ℓ/∂u∂μ at (μ, u), cells × points."""
    step = counts.steps * np.exp(u)[..., None]
    ia, ib, ic = 1 / (mu[..., None] + step), 1 / (1 - mu[..., None] + step), 1 / (1 + step)
    ra, rb = counts.above[:, None, :] * ia, counts.below[:, None, :] * ib
    rc = counts.sizes[:, None, :] * ic
    first = (step * (ra + rb - rc)).sum(-1)
    second = first - (step * step * (ra * ia + rb * ib - rc * ic)).sum(-1)
    cross = -(step * (ra * ia - rb * ib)).sum(-1)
    return first, second, cross


def icc_at(mu: Array, counts: WorldCounts, start: Array | None = None) -> tuple[Array, Array,
                                                                                Array]:
    """(ρ̃, dρ̃/dμ, u) at each rate ``mu`` (cells × points, 0 < μ < 1): the ρ in [0, 1) that
    maximises the likelihood with the mean held at μ, how fast it moves with μ (the implicit
    function theorem at the maximum; 0 where ρ̃ is 0), and u = logit ρ̃ (FLAT for 0), which a
    later call at nearby rates may pass as ``start``: the maximum is then sought within ±1 of
    it, and on the whole grid where it is not found there. For cells where some world is
    neither all successes nor all failures (otherwise the supremum is ρ = 1)."""
    if start is None:
        u, lo, hi = _located(mu, counts)
    else:
        u, lo, hi = start, start - 1.0, start + 1.0
        flat = start <= FLAT  # ρ̃ was 0: still 0 if ℓ falls as ρ leaves 0
        if flat.any():
            kept = flat & (_slopes(mu, np.full(mu.shape, FLAT), counts)[0] <= 0)
            u = np.where(flat, FLAT, start)
            lo, hi = np.where(kept, FLAT, lo), np.where(kept, FLAT, hi)
    u, second, cross = _newton_u(mu, u, lo, hi, counts)
    if start is not None:
        lost = (hi > lo) & ((np.abs(u - lo) < 1e-9) | (np.abs(u - hi) < 1e-9))
        if lost.any():
            return icc_at(mu, counts)
    both = _llf(np.concatenate([mu, mu], -1), np.concatenate([np.full(mu.shape, -np.inf), u], -1),
                counts)
    zero = (u <= FLAT) | (both[..., :mu.shape[-1]] >= both[..., mu.shape[-1]:])
    rho = np.where(zero, 0.0, 1 / (1 + np.exp(-u)))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(zero | ~(second < 0), 0.0, -cross / second * rho * (1 - rho))
    return rho, slope, np.where(zero, FLAT, u)


def _located(mu: Array, counts: WorldCounts) -> tuple[Array, Array, Array]:
    """The best point of the grid for each rate, and the neighbours that bracket it (none at
    the grid's lowest point: ρ̃ is 0 there, to within 1e-13)."""
    grid = np.broadcast_to(GRID, (*mu.shape, len(GRID)))
    flat = np.repeat(mu[..., None], len(GRID), axis=-1).reshape(len(mu), -1)
    llf = _llf(flat, grid.reshape(len(mu), -1), counts).reshape(grid.shape)
    best = llf.argmax(axis=-1)
    lo = np.where(best == 0, FLAT, GRID[np.maximum(best - 1, 0)])
    hi = np.where(best == 0, FLAT, np.where(best == len(GRID) - 1, 40.0,
                                            GRID[np.minimum(best + 1, len(GRID) - 1)]))
    return GRID[best], lo, hi


def _newton_u(mu: Array, u: Array, lo: Array, hi: Array,
              counts: WorldCounts) -> tuple[Array, Array, Array]:
    """The stationary point of ℓ in u within (lo, hi), from ``u``: Newton steps where they stay
    inside the bracket, bisection where not, the bracket narrowed by the sign of ∂ℓ/∂u."""
    second = cross = np.zeros(u.shape)
    for _ in range(200):
        first, second, cross = _slopes(mu, u, counts)
        lo, hi = np.where(first > 0, u, lo), np.where(first > 0, hi, u)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = u - first / second
        step = np.where((second < 0) & (newton >= lo) & (newton <= hi), newton, (lo + hi) / 2)
        done = np.abs(step - u) <= 1e-10
        u = step
        if done.all():
            break
    return u, second, cross
