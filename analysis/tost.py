"""Equivalence of two proportions: two one-sided tests (TOST) and the 90% interval.

Equivalence within ±margin holds at α = 0.05 exactly when the 90% interval of the difference
lies inside the margins, so each result carries both. Three designs:

* two independent arms (Wald or any statsmodels method, the same for test and interval —
  statsmodels' two functions default to different ones, ``reference/stats.md`` §5);
* paired episodes counted as independent pairs (z-test on the mean paired difference);
* paired episodes clustered by world (§8): the SE of the mean difference is cluster-robust —
  it comes from the spread of the per-world sums — and the reference is t with K − 1 degrees
  of freedom, because K worlds, not N pairs, carry the information.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from limbo.analysis import dist
from limbo.analysis.labels import cluster_codes

NAN = float("nan")
Array = np.ndarray


@dataclass(frozen=True)
class Tost:
    """Two one-sided tests for |p1 − p2| < margin, with the (1 − 2α) interval of p1 − p2."""

    diff: float
    p_lower: float
    """H0: diff ≤ −margin."""
    p_upper: float
    """H0: diff ≥ +margin."""
    pvalue: float
    ci_lo: float
    ci_hi: float
    margin: float

    @property
    def equivalent(self) -> bool:
        """Equivalence at α = 0.05 (equivalently: the 90% interval inside ±margin)."""
        return bool(self.pvalue < 0.05)


def proportion_difference_ci(c1: float, n1: float, c2: float, n2: float, alpha: float = 0.10,
                             method: str = "wald") -> tuple[float, float]:
    """Interval for p1 − p2 (``confint_proportions_2indep``); counts may be fractional."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(c1, n1, c2, n2, method=method, compare="diff",
                                        alpha=alpha)
    return float(lo), float(hi)


def tost_two_proportions(c1: float, n1: float, c2: float, n2: float, margin: float = 0.05,
                         method: str = "wald") -> Tost:
    """TOST for two independent proportions with its 90% interval, both by the same
    ``method`` (statsmodels' two functions default to different ones). NaN if an arm is
    empty."""
    if not (n1 > 0 and n2 > 0):
        return Tost(NAN, NAN, NAN, NAN, NAN, NAN, margin)
    if method == "wald":
        p1, p2 = c1 / n1, c2 / n2
        return _tost(p1 - p2, math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2), margin)
    from statsmodels.stats.proportion import tost_proportions_2indep

    t = tost_proportions_2indep(c1, n1, c2, n2, low=-margin, upp=margin, method=method)
    lo, hi = proportion_difference_ci(c1, n1, c2, n2, alpha=0.10, method=method)
    return Tost(c1 / n1 - c2 / n2, float(t.results_larger.pvalue),
                float(t.results_smaller.pvalue), float(t.pvalue), lo, hi, margin)


def tost_paired(b: int, c: int, n: int, margin: float = 0.05) -> Tost:
    """TOST on paired episodes (b = A only, c = B only, n pairs): d = (b − c)/n,
    SE = √((b + c)/n − d²)/√n, two one-sided z-tests and d ± z₀.₉₅·SE."""
    if n <= 0:
        return Tost(NAN, NAN, NAN, NAN, NAN, NAN, margin)
    d = (b - c) / n
    return _tost(d, math.sqrt(max((b + c) / n - d * d, 0.0)) / math.sqrt(n), margin)


def _tost(d: float, se: float, margin: float, df: float | None = None) -> Tost:
    """Two one-sided tests of ``d`` against ±``margin`` and the 90% interval d ± q₀.₉₅·SE,
    with q from the normal, or from t(``df``). With SE = 0 (every episode alike) the
    difference is known exactly: each test rejects exactly when ``d`` lies strictly inside
    its margin."""
    if se == 0:
        p_lo, p_up = float(d <= -margin), float(d >= margin)
    else:
        p_lo = float(dist.sf((d + margin) / se, df))
        p_up = float(dist.cdf((d - margin) / se, df))
    q = float(dist.ppf(0.95, df))
    return Tost(d, p_lo, p_up, max(p_lo, p_up), d - q * se, d + q * se, margin)


@dataclass(frozen=True)
class ClusteredTost(Tost):
    """Paired TOST with a cluster-robust SE and a t(K − 1) reference."""

    se: float
    clusters: int
    """K, the worlds the pairs fall in; the degrees of freedom are K − 1."""
    pairs: int
    """N, the pairs (for :func:`tost_clustered_arms`, the episodes of both arms)."""


def tost_paired_clustered(a: Sequence[float] | Array, b: Sequence[float] | Array,
                          clusters: Sequence[Any] | Array, margin: float = 0.05) -> ClusteredTost:
    """TOST of the mean paired difference Δ = Σ(a − b)/N (one entry per pair) with the
    cluster-robust SE of §8: SE = √(K/(K−1) · Σ_k (D_k − Δ·m_k)²) / N, where D_k is world k's
    sum of paired differences and m_k its number of pairs; tests and the 90% interval on
    t(K − 1). NaN with fewer than two worlds (no spread between worlds to measure)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    codes, k = cluster_codes(clusters, len(diff))
    n = len(diff)
    if k < 2:
        return ClusteredTost(NAN, NAN, NAN, NAN, NAN, NAN, margin, NAN, k, n)
    delta = float(diff.sum() / n)
    sums, sizes = np.bincount(codes, diff, k), np.bincount(codes, minlength=k)
    se = math.sqrt(k / (k - 1) * float(((sums - delta * sizes) ** 2).sum())) / n
    t = _tost(delta, se, margin, df=k - 1)
    return ClusteredTost(t.diff, t.p_lower, t.p_upper, t.pvalue, t.ci_lo, t.ci_hi, margin, se,
                         k, n)


def tost_clustered_arms(y: Sequence[float] | Array, arm: Sequence[bool] | Array,
                        clusters: Sequence[Any] | Array, weights: Array | None = None,
                        margin: float = 0.05) -> ClusteredTost:
    """TOST of Δ = p_A − p_B for two arms whose episodes share worlds without being paired one
    to one (``arm`` True for A): each p is a weighted mean within its arm, and the SE is the
    cluster-robust one of §8 generalised to such arms — with u_k = Σ_{A,k} w(y − p_A)/W_A −
    Σ_{B,k} w(y − p_B)/W_B, SE = √(K/(K−1) · Σ u_k²) over the K worlds either arm ran in; tests
    and the 90% interval on t(K − 1). Episodes paired one to one with equal weights give exactly
    :func:`tost_paired_clustered`'s SE; every episode its own cluster gives the Wald SE of two
    independent proportions (times √(K/(K−1))). NaN with an empty arm or fewer than two
    worlds."""
    y, a = np.asarray(y, dtype=float), np.asarray(arm, dtype=bool)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    codes, k = cluster_codes(clusters, len(y))
    if k < 2 or a.all() or not a.any():
        return ClusteredTost(NAN, NAN, NAN, NAN, NAN, NAN, margin, NAN, k, len(y))
    means = [float(np.average(y[side], weights=w[side])) for side in (a, ~a)]
    scores = np.where(a, w * (y - means[0]) / w[a].sum(), -w * (y - means[1]) / w[~a].sum())
    u = np.bincount(codes, scores, k)
    se = math.sqrt(k / (k - 1) * float((u * u).sum()))
    t = _tost(means[0] - means[1], se, margin, df=k - 1)
    return ClusteredTost(t.diff, t.p_lower, t.p_upper, t.pvalue, t.ci_lo, t.ci_hi, margin, se,
                         k, len(y))
