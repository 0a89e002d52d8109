"""Rates whose interval counts worlds, not episodes (``reference/stats.md`` §8).

Every episode runs in one world (task template × instance) and each world is reused across
models, faults and conditions, so the episodes of a world are correlated: twenty episodes of one
world carry far less information than twenty of twenty worlds. Kish's effective n corrects for
unequal *weights* only and comes out ≈ n, so an interval on it is several times too narrow.
Here the design effect of clustering, estimated from the data by the ANOVA intra-cluster
correlation, multiplies Kish's weighting design effect, and the Wilson interval is taken on the
n that remains. ``cluster="none"`` keeps the weighting design effect alone — the interval every
table printed before clustering — so old outputs stay explainable.

The array functions work over the last axis (clusters) and broadcast over any leading axes, so a
coverage simulation or a bootstrap evaluates thousands of cells in one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

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


def wilson_interval(x: Array | float, n: Array | float,
                    alpha: float = 0.05) -> tuple[Array, Array]:
    """Wilson score interval, elementwise, for fractional ``x`` of ``n`` (as ``stats.wilson``):
    clipped to [0, 1], exactly 0 at x ≤ 0 and 1 at x ≥ n, NaN where n is 0."""
    x, n = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(n, dtype=float))
    z = float(norm.ppf(1 - alpha / 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = x / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(np.maximum(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    lo = np.where(x <= 0, 0.0, np.clip(centre - half, 0.0, 1.0))
    hi = np.where(x >= n, 1.0, np.clip(centre + half, 0.0, 1.0))
    empty = ~(n > 0)
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def anova_icc(successes: Array, sizes: Array) -> tuple[Array, Array]:
    """ANOVA intra-cluster correlation of a binary outcome from per-cluster counts (last axis;
    clusters of size 0 are absent): ρ = (MSB − MSW) / (MSB + (m₀ − 1)·MSW) with
    m₀ = (N − Σm²/N)/(K − 1), clipped to [0, 1].

    Returns (ρ, undefined). Where ρ has no estimate — one cluster, every cluster of one
    episode, or no variation at all (a cell at 0% or 100%: MSB = MSW = 0) — ρ is 1, the
    cautious choice §8 prescribes (the cell then counts as one observation per cluster), and
    ``undefined`` is True so the table can flag it."""
    y, m = np.asarray(successes, dtype=float), np.asarray(sizes, dtype=float)
    total, k = m.sum(-1), (m > 0).sum(-1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = y.sum(-1) / total
        pk = np.where(m > 0, y / np.where(m > 0, m, 1.0), 0.0)
        msb = (m * (pk - p[..., None]) ** 2).sum(-1) / (k - 1)
        msw = (m * pk * (1 - pk)).sum(-1) / (total - k)
        m0 = (total - (m * m).sum(-1) / total) / (k - 1)
        denom = msb + (m0 - 1) * msw
        rho = (msb - msw) / denom
    undefined = (k < 2) | (total <= k) | ~(denom > 0)
    return np.where(undefined, 1.0, np.clip(rho, 0.0, 1.0)), undefined


def cluster_design_effect(rho: Array | float, sizes: Array) -> Array:
    """deff_c = 1 + (m̃ − 1)·ρ with m̃ = Σm²/N, the size-weighted mean cluster size (equal to
    the common size when all clusters are equal; larger clusters count for more)."""
    m = np.asarray(sizes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        m_tilde = (m * m).sum(-1) / m.sum(-1)
    deff: Array = 1 + (m_tilde - 1) * np.asarray(rho, dtype=float)
    return deff


@dataclass(frozen=True)
class ClusteredRate(Rate):
    """A rate whose ``n_eff`` is n / (deff_w · deff_c) and whose Wilson interval is on it."""

    clusters: int
    """K, the number of clusters the episodes fall in (n under ``cluster="none"``)."""
    deff: float
    """Total design effect deff_w · deff_c (n / n_eff)."""
    deff_w: float
    """Kish's weighting design effect, n / (Σw)²/Σw² (1 without weights)."""
    deff_c: float
    """The clustering design effect, 1 + (m̃ − 1)·ρ (1 under ``cluster="none"``)."""
    icc: float
    """The ANOVA intra-cluster correlation ρ (NaN under ``cluster="none"``)."""
    note: str = ""
    """Why ρ was set to 1 (no estimate), or empty."""


def clustered_rate(y: Sequence[bool] | Array, clusters: Sequence[Any] | Array | None,
                   weights: Array | None = None, alpha: float = 0.05) -> ClusteredRate:
    """Weighted rate Σw·y/Σw with the Wilson interval on (rate·n/deff, n/deff), where
    deff = deff_w · deff_c (§8). ``clusters`` is each episode's cluster label, or None for
    the weighting design effect alone (exactly ``stats.kish_rate``'s interval)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n == 0:
        return ClusteredRate(0, 0, NAN, 0.0, NAN, NAN, 0, NAN, NAN, NAN, NAN)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    total = w.sum()
    rate = float((w * y).sum() / total)
    kish = float(total * total / (w * w).sum())  # as kish_rate computes it: none is today's n
    if clusters is None:
        k, rho, deff_c, note = n, NAN, 1.0, ""
    else:
        codes = cluster_codes(clusters, n)[0]
        sizes, hits = np.bincount(codes), np.bincount(codes, weights=y)
        icc, undefined = anova_icc(hits, sizes)
        k, rho = len(sizes), float(icc)
        deff_c = float(cluster_design_effect(rho, sizes))
        note = _undefined_note(k, n, bool(undefined))
    n_eff = kish / deff_c
    lo, hi = wilson(rate * n_eff, n_eff, alpha)  # one cell: the scalar form, as kish_rate's
    return ClusteredRate(int(y.sum()), n, rate, n_eff, lo, hi, k, n / n_eff, n / kish, deff_c,
                         rho, note)


def _undefined_note(clusters: int, n: int, undefined: bool) -> str:
    if not undefined:
        return ""
    if clusters == n:
        return "one episode per cluster: nothing to correct for (deff_c = 1)"
    if clusters == 1:
        return "one cluster: no intra-cluster correlation can be estimated; ρ = 1 assumed"
    return "intra-cluster correlation undefined (no variation to apportion); ρ = 1 assumed"
