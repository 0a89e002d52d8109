"""The statistics behind the tables: pure functions over counts or arrays, no I/O.

Each function states what it computes; the formulas, library calls and pitfalls follow
``reference/stats.md`` and its reference values are asserted in ``tests/test_analysis_stats.py``.
Guards are behaviour: an empty cell gives NaN (printed "—"), never 0; a model that cannot be
estimated (one cluster, an arm at 0% or 100%) says so instead of returning a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binom, norm

NAN = float("nan")
Array = np.ndarray


# -- rates ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rate:
    """A (possibly weighted) proportion with its Wilson interval on Kish's effective n."""

    successes: int
    """Raw count of episodes with the outcome."""
    n: int
    """Raw count of episodes."""
    rate: float
    n_eff: float
    lo: float
    hi: float


def wilson(x: float, n: float, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for ``x`` successes in ``n`` trials (both may be fractional, as
    with Kish-weighted counts), clipped to [0, 1] — exactly 0 at x = 0 and 1 at x = n, where
    rounding would leave ±1e-17; (NaN, NaN) when ``n`` is 0."""
    if not n > 0:
        return NAN, NAN
    z = float(norm.ppf(1 - alpha / 2))
    p = x / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if x <= 0 else max(0.0, centre - half)
    return lo, 1.0 if x >= n else min(1.0, centre + half)


def equal_weights(groups: Sequence[Any] | Array) -> Array:
    """Weights giving every group the same total weight: w_i = 1 / (size of i's group).

    With them the weighted rate is the unweighted mean of the group rates."""
    import pandas as pd

    if isinstance(groups, pd.Series) and isinstance(groups.dtype, pd.CategoricalDtype):
        codes = groups.cat.codes.to_numpy()
    else:
        codes = pd.factorize(np.asarray(groups, dtype=object))[0]
    weights: Array = 1.0 / np.bincount(codes)[codes]
    return weights


def kish_rate(y: Sequence[bool] | Array, weights: Array | None = None,
              alpha: float = 0.05) -> Rate:
    """Weighted rate Σw·y/Σw, Kish's effective n (Σw)²/Σw², and the Wilson interval on
    (rate·n_eff, n_eff). Without weights every episode counts once (plain Wilson)."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    if n == 0:
        return Rate(0, 0, NAN, 0.0, NAN, NAN)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    total = w.sum()
    rate = float((w * y).sum() / total)
    n_eff = float(total * total / (w * w).sum())
    lo, hi = wilson(rate * n_eff, n_eff, alpha)
    return Rate(int(y.sum()), n, rate, n_eff, lo, hi)


# -- paired tests --------------------------------------------------------------------------

@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on paired binary outcomes."""

    b: int
    """Pairs with the outcome under A only."""
    c: int
    """Pairs with the outcome under B only."""
    statistic: float
    pvalue: float


def mcnemar_exact(b: int, c: int) -> McNemar:
    """Exact (binomial) McNemar: p = min(1, 2·BinomCDF(min(b, c); b + c, ½)); p = 1 when
    there is no discordant pair (b + c = 0), where scipy's binomtest would raise."""
    if b + c == 0:
        return McNemar(b, c, 0.0, 1.0)
    p = min(1.0, 2.0 * float(binom.cdf(min(b, c), b + c, 0.5)))
    return McNemar(b, c, float(min(b, c)), p)


def discordant(a: Sequence[bool] | Array, b: Sequence[bool] | Array) -> tuple[int, int]:
    """(b, c) of paired outcomes: pairs true under ``a`` only, and under ``b`` only."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    return int((a & ~b).sum()), int((~a & b).sum())


def holm(pvalues: Sequence[float] | Array) -> Array:
    """Holm's step-down adjustment: sorted ascending, adj₍ᵢ₎ = min(1, maxⱼ≤ᵢ (m − j + 1)·p₍ⱼ₎),
    mapped back to the input order — what ``multipletests(method="holm")`` computes (not
    its default, Holm–Šidák). NaN entries stay NaN and are not counted in the family size m."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


# -- equivalence ---------------------------------------------------------------------------

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
        return _tost_z(p1 - p2, math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2), margin)
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
    return _tost_z(d, math.sqrt(max((b + c) / n - d * d, 0.0)) / math.sqrt(n), margin)


def _tost_z(d: float, se: float, margin: float) -> Tost:
    """Two one-sided z-tests of ``d`` against ±``margin`` and the 90% interval d ± z₀.₉₅·SE.
    With SE = 0 (every episode alike) the difference is known exactly: each test rejects
    exactly when ``d`` lies strictly inside its margin."""
    if se == 0:
        p_lo, p_up = float(d <= -margin), float(d >= margin)
    else:
        p_lo, p_up = float(norm.sf((d + margin) / se)), float(norm.cdf((d - margin) / se))
    z = float(norm.ppf(0.95))
    return Tost(d, p_lo, p_up, max(p_lo, p_up), d - z * se, d + z * se, margin)
