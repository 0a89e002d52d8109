"""Rates whose interval counts worlds, not episodes (``reference/stats.md`` §8, §9).

Every episode runs in one world (task template × instance) and each world is reused across
models, faults and conditions, so the episodes of a world are correlated: twenty episodes of one
world carry far less information than twenty of twenty worlds. Kish's effective n corrects for
unequal *weights* only and comes out ≈ n, so an interval on it is several times too narrow.

Here the interval is Wilson's score interval with the design effect of clustering in its
variance: a candidate rate μ is inside when (rate − μ)² ≤ q²·μ(1 − μ)·deff(μ)/n_kish. The
design effect 1 + (m̃ − 1)·ρ is not estimated once at the observed rate but at each μ, as the
intra-world correlation that best explains the per-world counts if μ were the rate
(:mod:`~limbo.analysis.betabinomial`): the plain estimate of ρ is least reliable for the rare,
lumpy outcomes (a few worlds with many duplicates) where an interval needs to reach furthest,
and the simulation of docs/analysis.md (benchmarks/bench_coverage.py) shows where a
once-estimated ρ fails (under 85 % coverage at 16 worlds). q² = z²·K/(K − 1) corrects for a
variance estimated from K clusters.
``cluster="none"`` keeps the plain Wilson interval on Kish's n — the interval every table
printed before clustering — so old outputs stay explainable.

:func:`interval` works on a leading axis of cells, so a coverage simulation evaluates
thousands of cells in one call; :func:`clustered_rate` is one cell of episodes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis import betabinomial as bb
from limbo.analysis import dist
from limbo.analysis.labels import cluster_codes
from limbo.analysis.stats import Rate, wilson
from limbo.errors import UsageError

Array = np.ndarray
NAN = float("nan")

CLUSTERINGS = ("world", "template", "none")
"""What an episode is clustered by: its world (template and instance, the default), its task
template (coarser, for when a template's instances are alike), or nothing (every episode its
own cluster: the weighting design effect alone)."""


def cluster_ids(frame: pd.DataFrame, cluster: str) -> Array | None:
    """Each row's cluster label under ``cluster`` (None for ``"none"``). A world is the pair
    (template, instance): instance numbers repeat across templates, so never the instance
    alone."""
    if cluster == "none":
        return None
    if cluster not in ("world", "template"):
        raise UsageError(f"--cluster {cluster!r}: choose from {', '.join(CLUSTERINGS)}")
    ids = _text(frame["template"])
    if cluster == "world":
        ids = np.char.add(np.char.add(ids, "#"), _text(frame["instance"]))
    return ids


def _text(column: pd.Series) -> Array:
    """A column as a numpy array of text, without pandas' per-row string machinery: every table
    asks for the clusters of hundreds of cells (a categorical's names are converted once)."""
    values = column.array
    found: Array
    if isinstance(values, pd.Categorical) and (values.codes >= 0).all():
        found = np.asarray(values.categories.astype(str), dtype=str)[values.codes]
    elif column.dtype.kind in "iub":
        found = column.to_numpy().astype(str)
    else:  # anything else, missing labels included (cluster_codes refuses those)
        found = column.astype(object).to_numpy()
    return found


def interval(rate: Array, n_kish: Array, m_tilde: Array, clusters: Array,
             counts: bb.WorldCounts, alpha: float = 0.05) -> tuple[Array, Array, Array]:
    """(lo, hi, ρ̂) per cell (leading axis): the rate's interval with the design effect
    re-estimated at every candidate rate μ — the μ where

        (rate − μ)² ≤ q² · μ(1 − μ) · (1 + (m̃ − 1)·ρ̃(μ)) / n_kish,   q² = z² · K / (K − 1),

    ρ̃(μ) the beta-binomial maximum-likelihood ICC at mean μ (:mod:`.betabinomial`), m̃ = Σm²/N.
    With ρ̃ fixed this is Wilson's interval on n_kish / deff; K/(K − 1) is the usual small-sample
    factor of a variance estimated from K clusters. ρ̂ = ρ̃(rate). A cell whose every world is
    all successes or all failures has its likelihood largest at ρ = 1 (n_eff = N / m̃, about K);
    a cell of one cluster has no interval (NaN)."""
    q2 = dist.ppf(1 - alpha / 2) ** 2 * clusters / np.maximum(clusters - 1, 1)
    lo0, hi0 = _wilson(rate, n_kish, q2)
    lo1, hi1 = _wilson(rate, n_kish / m_tilde, q2)
    mixed = counts.above[:, 0] + counts.below[:, 0] > counts.sizes[:, 0]
    lo, hi, icc = lo1.copy(), hi1.copy(), np.ones(len(rate))
    if mixed.any():
        sub = bb.WorldCounts(counts.above[mixed], counts.below[mixed], counts.sizes[mixed])
        args = (rate[mixed], n_kish[mixed], m_tilde[mixed], q2[mixed], sub)
        ends = _ends(np.column_stack([hi0[mixed], lo0[mixed]]),
                     np.column_stack([hi1[mixed], lo1[mixed]]), *args)
        hi[mixed], lo[mixed] = ends[:, 0], ends[:, 1]
        icc[mixed] = bb.icc_at(rate[mixed][:, None], sub)[0][:, 0]
    none = clusters < 2
    return np.where(none, np.nan, lo), np.where(none, np.nan, hi), np.where(none, np.nan, icc)


def _wilson(p: Array, n: Array, q2: Array) -> tuple[Array, Array]:
    """Wilson's bounds for a proportion ``p`` of ``n`` with the squared quantile ``q2``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1 + q2 / n
        centre = (p + q2 / (2 * n)) / denom
        half = np.sqrt(q2 * (p * (1 - p) / n + q2 / (4 * n * n))) / denom
    return (np.where(p <= 0, 0.0, np.clip(centre - half, 0.0, 1.0)),
            np.where(p >= 1, 1.0, np.clip(centre + half, 0.0, 1.0)))


SCAN = 8
"""Points between the ρ = 0 and ρ = 1 bounds where an interval's end is first looked for."""


def _ends(inner: Array, outer: Array, rate: Array, n_kish: Array, m_tilde: Array, q2: Array,
          counts: bb.WorldCounts) -> Array:
    """Each end (cells × 2: upper, lower) as the outermost μ between ``inner`` (the ρ = 0
    bound, accepted) and ``outer`` (the ρ = 1 bound, which contains every accepted μ) where the
    inequality of :func:`interval` holds: a scan brackets it, a safeguarded Newton iteration on
    the excess finishes it."""
    frac = np.arange(SCAN + 1) / SCAN
    points = inner[..., None] + (outer - inner)[..., None] * frac  # cells × 2 × scan
    cell = (rate, n_kish, m_tilde, q2, counts)
    excess, _, u = (v.reshape(points.shape)
                    for v in _excess(points.reshape(len(rate), -1), *cell, None))
    accepted = excess >= 0
    accepted[..., 0] = True
    last = SCAN - np.argmax(accepted[..., ::-1], axis=-1)
    whole = last == SCAN

    def at(values: Array, index: Array) -> Array:
        picked: Array = np.take_along_axis(values, index[..., None], -1)[..., 0]
        return picked

    beyond = np.minimum(last + 1, SCAN)
    near, far = at(points, last), at(points, beyond)
    g_near, g_far = at(excess, last), at(excess, beyond)
    with np.errstate(divide="ignore", invalid="ignore"):  # the secant between them
        start = np.where(g_near > g_far, near + (far - near) * g_near / (g_near - g_far),
                         (near + far) / 2)
    found = _root(near, far, start, at(u, last), *cell)
    return np.where(whole, outer, found)


def _excess(mu: Array, rate: Array, n_kish: Array, m_tilde: Array, q2: Array,
            counts: bb.WorldCounts, start: Array | None) -> tuple[Array, Array, Array]:
    """q²·μ(1 − μ)·deff(μ)/n_kish − (rate − μ)², ≥ 0 where μ is in the interval, its
    derivative in μ, and logit ρ̃(μ) (cells × points; ``start`` as for ``icc_at``)."""
    at = np.clip(mu, 1e-15, 1 - 1e-15)
    rho, slope, u = bb.icc_at(at, counts, start)
    scale, spread = (q2 / n_kish)[:, None], (m_tilde - 1)[:, None]
    deff = 1 + spread * rho
    value = scale * at * (1 - at) * deff - (rate[:, None] - mu) ** 2
    derivative = (scale * ((1 - 2 * at) * deff + at * (1 - at) * spread * slope)
                  + 2 * (rate[:, None] - mu))
    return value, derivative, u


def _root(near: Array, far: Array, x: Array, u: Array, rate: Array, n_kish: Array,
          m_tilde: Array, q2: Array, counts: bb.WorldCounts) -> Array:
    """The sign change of the excess between ``near`` (≥ 0) and ``far`` (< 0), cells × 2, from
    ``x``; ``u`` is logit ρ̃ at ``near``, where the search for ρ̃ starts."""
    for _ in range(100):
        value, slope, u = _excess(x, rate, n_kish, m_tilde, q2, counts, u)
        near, far = np.where(value >= 0, x, near), np.where(value >= 0, far, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = x - value / slope
        inside = (newton - near) * (newton - far) <= 0
        step = np.where(inside, newton, (near + far) / 2)
        done = np.abs(step - x) <= 1e-12
        x = step
        if done.all():
            break
    return x


@dataclass(frozen=True)
class ClusteredRate(Rate):
    """A rate with its world-clustered interval (:func:`interval`); ``n_eff`` = n / (deff_w ·
    deff_c), the cell's information at its observed rate, in episodes."""

    clusters: int
    """K, the number of clusters the episodes fall in (n under ``cluster="none"``)."""
    deff: float
    """Total design effect deff_w · deff_c (n / n_eff)."""
    deff_w: float
    """Kish's weighting design effect, n / (Σw)²/Σw² (1 without weights)."""
    deff_c: float
    """The clustering design effect at the observed rate, 1 + (m̃ − 1)·ρ (1 under
    ``cluster="none"``)."""
    icc: float
    """ρ, the intra-cluster correlation most likely at the observed rate (beta-binomial maximum
    likelihood; 1 with one cluster; NaN under ``cluster="none"``)."""
    note: str = ""
    """Why ρ is what it is where that needs saying (one cluster: no interval), or empty."""


def clustered_rate(y: Sequence[bool] | Array, clusters: Sequence[Any] | Array | None,
                   weights: Array | None = None, alpha: float = 0.05) -> ClusteredRate:
    """Weighted rate Σw·y/Σw with its interval clustered by ``clusters`` (each episode's cluster
    label; :func:`interval`), or with None the Wilson interval on Kish's n alone (exactly
    ``stats.kish_rate``'s). One cluster has no interval (NaN, shown "—")."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n == 0:
        return ClusteredRate(0, 0, NAN, 0.0, NAN, NAN, 0, NAN, NAN, NAN, NAN)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    total = w.sum()
    rate = float((w * y).sum() / total)
    kish = float(total * total / (w * w).sum())  # as kish_rate computes it: none is today's n
    if clusters is None:
        lo, hi = wilson(rate * kish, kish, alpha)  # one cell: the scalar form, as kish_rate's
        return ClusteredRate(int(y.sum()), n, rate, kish, lo, hi, n, n / kish, n / kish, 1.0,
                             NAN)
    codes = cluster_codes(clusters, n)[0]
    sizes, hits = np.bincount(codes), np.bincount(codes, weights=y).round().astype(int)
    pairs = tuple(sorted(zip(sizes.tolist(), hits.tolist(), strict=True)))
    lo, hi, rho = _cell(rate, kish, pairs, alpha)
    k, m_tilde = len(sizes), float((sizes * sizes).sum() / n)
    deff_c = 1 + (m_tilde - 1) * (1.0 if k == 1 else rho)
    return ClusteredRate(int(y.sum()), n, rate, kish / deff_c, lo, hi, k, n * deff_c / kish,
                         n / kish, deff_c, 1.0 if k == 1 else rho, _note(pairs, n))


@functools.lru_cache(maxsize=4096)
def _cell(rate: float, kish: float, pairs: tuple[tuple[int, int], ...],
          alpha: float) -> tuple[float, float, float]:
    """One cell's (lo, hi, ρ̂) from its worlds' (size, successes): the same counts give the
    same interval, computed once (a table's cells recur across tables and figures)."""
    sizes, hits = (np.array([list(v) for v in zip(*pairs, strict=True)], dtype=int))
    m_tilde = (sizes * sizes).sum() / sizes.sum()
    found = interval(np.array([rate]), np.array([kish]), np.array([m_tilde]),
                     np.array([len(sizes)]), bb.world_counts(hits, sizes), alpha)
    lo, hi, rho = (float(v[0]) for v in found)
    return lo, hi, rho


def _note(pairs: tuple[tuple[int, int], ...], n: int) -> str:
    """What the reader of a cell should know about its ρ: nothing, or why it is what it is."""
    if len(pairs) == 1:
        return "one cluster: no interval can be estimated (one world says nothing of how worlds vary)"
    if len(pairs) == n:
        return "one episode per cluster: nothing to correct for (deff_c = 1)"
    if all(hits in (0, size) for size, hits in pairs):
        return ("every cluster all one way: ρ = 1, the likelihood's maximum "
                "(as informative as one episode per cluster)")
    return ""
