"""Intervals that ``limbo run`` prints at its end, in plain Python (no numpy, no scipy: a run
needs only the core dependencies), shared with the analysis, which imports them from here.

* :func:`t_quantile`: Student's t quantile for whole degrees of freedom, exact (bisection on the
  closed-form CDF of Abramowitz & Stegun 26.7.3–4), for the few-clusters intervals below.
* :func:`wilson`: the Wilson score interval, with any quantile (z, or t on K − 1 df).
* :func:`clustered_mean`: the mean over units (cells, episodes) of values in [0, 1], with an
  interval that counts the clusters (worlds) the units fall in: the cluster-robust variance of a
  ratio of sums, turned into an effective n and a Wilson interval on t(K − 1) — the remedy
  ``reference/stats.md`` §9 names for tables with few worlds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

NAN = math.nan
Z95 = 1.959963984540054
"""The standard normal's 97.5% quantile."""


def t_cdf(t: float, df: int) -> float:
    """P(T ≤ t) for Student's t on ``df`` ≥ 1 whole degrees of freedom (a finite sum)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:  # A(t|ν) = 2/π (θ + sinθ cosθ (1 + 2/3 cos²θ + ... ))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for j in range(1, (df - 1) // 2):
            term *= c2 * (2 * j) / (2 * j + 1)
            total += term
        inside = 2 / math.pi * (theta + s * math.cos(theta) * total)
    else:  # A(t|ν) = sinθ (1 + 1/2 cos²θ + 1·3/(2·4) cos⁴θ + ... )
        term = total = 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        inside = s * total
    half = 0.5 * min(inside, 1.0)
    return 0.5 + half if t >= 0 else 0.5 - half


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of t on ``df`` degrees of freedom, to 1e-12 (bisection)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def wilson(x: float, n: float, quantile: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``x`` successes in ``n`` (fractional allowed) with the given
    quantile, clipped to [0, 1]; (NaN, NaN) when n is not positive."""
    if not n > 0:
        return NAN, NAN
    q2, p = quantile * quantile, x / n
    denom = 1 + q2 / n
    centre = (p + q2 / (2 * n)) / denom
    half = quantile * math.sqrt(max(p * (1 - p), 0.0) / n + q2 / (4 * n * n)) / denom
    return (0.0 if x <= 0 else max(0.0, centre - half)), (1.0 if x >= n else min(1.0, centre + half))


@dataclass(frozen=True)
class MeanInterval:
    """A mean over units clustered in worlds, with its 95% interval and what it pools."""

    estimate: float
    lo: float
    hi: float
    units: int
    """How many values were averaged (cells, for pass^k)."""
    clusters: int
    """The worlds they fall in: the interval's unit of replication."""
    n_eff: float
    """The effective number of independent units the interval is worth."""

    def shown(self, digits: int = 1) -> str:
        """``62.0% [55.1, 68.4]`` (percent), or ``—`` without units."""
        if not self.units:
            return "—"
        body = f"{100 * self.estimate:.{digits}f}%"
        if math.isnan(self.lo):
            return body
        return f"{body} [{100 * self.lo:.{digits}f}, {100 * self.hi:.{digits}f}]"


def clustered_mean(by_cluster: Iterable[tuple[float, int]]) -> MeanInterval:
    """The mean of unit values in [0, 1] from per-cluster (sum, units) pairs, and its interval.

    Estimate: Σ S_k / Σ m_k (every unit weighs the same). Variance: the cluster-robust one of a
    ratio, V = K/(K − 1) · Σ (S_k − est·m_k)² / M². It becomes an effective n = est(1 − est)/V
    (what a binomial proportion with that variance would have), at most the M units; where
    nothing varies (est at 0 or 1, or every cluster alike) the clusters are assumed wholly alike
    and n_eff = K, as the analysis assumes ρ = 1 there. The interval is Wilson's on
    (est·n_eff, n_eff) with the t(K − 1) quantile; with one cluster there is none (NaN)."""
    pairs = [(float(s), int(m)) for s, m in by_cluster if m > 0]
    units = sum(m for _, m in pairs)
    if not units:
        return MeanInterval(NAN, NAN, NAN, 0, 0, NAN)
    k = len(pairs)
    est = sum(s for s, _ in pairs) / units
    if k < 2:
        return MeanInterval(est, NAN, NAN, units, k, NAN)
    var = k / (k - 1) * sum((s - est * m) ** 2 for s, m in pairs) / units ** 2
    spread = est * (1 - est)
    n_eff = float(k) if var <= 0 or spread <= 0 else min(float(units), max(spread / var, 1.0))
    lo, hi = wilson(est * n_eff, n_eff, t_quantile(0.975, k - 1))
    return MeanInterval(est, lo, hi, units, k, n_eff)
