"""Odds ratios from a logit GEE clustered by world, and what to do when they cannot be estimated.

A GEE odds ratio is population-averaged, and its sandwich SE is only as good as the number of
clusters G behind it: with few clusters the uncorrected sandwich is biased low and a normal
reference overstates the evidence (with 16 clusters a p of 1e-27 where the honest one is
about 1e-7). :func:`gee_clustered` is the estimate ``reference/stats.md`` §8 asks for: groups =
the world, the Mancl–DeRouen bias-reduced covariance, and a t reference with G − p degrees of
freedom (p regression parameters; Li & Redden) — :mod:`.gee_solver` gives the covariance
(statsmodels' numbers), the t step is done here. It refuses fewer than :data:`MIN_CLUSTERS`
clusters, where no sandwich is credible, and a fit the solver finds degenerate.

Refusals and cautions travel in the result (NaN estimate and a ``note``), as every odds ratio of
the tables does: a table row then says why there is no number instead of the table failing.
When an arm is at 0% or 100% the odds ratio diverges (:func:`separation`); :func:`firth_logit`
gives the penalised estimate the tables show instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from limbo.analysis import dist, gee_solver
from limbo.analysis.labels import cluster_codes

NAN = float("nan")
Array = np.ndarray
MIN_CLUSTERS = 5
"""Fewest clusters :func:`gee_clustered` fits: below it the between-cluster variance the
sandwich estimates rests on four or fewer values."""


@dataclass(frozen=True)
class OddsRatio:
    """An odds ratio for a binary exposure, or the reason it cannot be estimated."""

    beta: float
    se: float
    pvalue: float
    clusters: int
    note: str = ""
    """Why the estimate is missing, or a caution (few clusters, singular fit)."""
    extra: dict[str, float] = field(default_factory=dict)
    df: float | None = None
    """Degrees of freedom of the t reference for p and interval; None: normal (Wald z)."""

    @property
    def odds_ratio(self) -> float:
        return math.exp(self.beta) if math.isfinite(self.beta) else NAN

    def ci(self, alpha: float = 0.05) -> tuple[float, float]:
        """Interval exp(β ± q·SE), q the normal or t(df) quantile."""
        q = float(dist.ppf(1 - alpha / 2, self.df))
        if not (math.isfinite(self.beta) and math.isfinite(self.se)):
            return NAN, NAN
        return math.exp(self.beta - q * self.se), math.exp(self.beta + q * self.se)


def not_estimable(clusters: int, note: str) -> OddsRatio:
    return OddsRatio(NAN, NAN, NAN, clusters, note)


def separation(y: Array, x: Array, trials: Array | None = None) -> str:
    """Which arm of binary ``x`` has a 0% or 100% outcome rate ("" if none): the odds ratio
    then diverges, and GEE/GLMM report nonsense instead of failing."""
    n = np.ones(len(y)) if trials is None else np.asarray(trials, dtype=float)
    for level in (0, 1):
        arm = np.asarray(x) == level
        events, total = float(np.asarray(y)[arm].sum()), float(n[arm].sum())
        if total == 0:
            return f"no episodes with x={level}"
        if events in (0.0, total):
            return f"separation: every episode with x={level} has outcome {int(events > 0)}"
    return ""


def wald_p(beta: float, se: float, df: float | None = None) -> float:
    """Two-sided p of β/SE against the normal, or t(``df``)."""
    if not se > 0:
        return NAN
    return float(2 * dist.sf(abs(beta / se), df))


def _cluster_codes(groups: Sequence[Any] | Array) -> tuple[Array, int]:
    codes = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)[1]
    return codes, int(codes.max()) + 1 if len(codes) else 0


def _fit(y: Array, x: Array, codes: Array, cov_struct: str,
         cov_type: str) -> tuple[gee_solver.GeeFit, dict[str, float]]:
    """The logit GEE of y on (1, x) (:mod:`.gee_solver`), and the extras every odds ratio
    carries (intercept; α of an exchangeable structure)."""
    if cov_struct not in ("exchangeable", "independence"):
        raise ValueError(f"cov_struct {cov_struct!r}: exchangeable or independence")
    design = np.column_stack([np.ones(len(x)), x])
    res = gee_solver.fit(y, design, codes, cov_struct == "exchangeable", cov_type)
    extra = {"intercept": float(res.params[0])}
    if cov_struct == "exchangeable":
        extra["alpha"] = res.alpha
    return res, extra


def gee_odds_ratio(y: Sequence[float] | Array, x: Sequence[float] | Array,
                   groups: Sequence[Any] | Array, cov_struct: str = "exchangeable",
                   cov_type: str = "robust") -> OddsRatio:
    """Population-averaged odds ratio of binary ``x`` from a logit GEE clustered by
    ``groups`` (exchangeable working correlation, robust sandwich SE, z-test). Refuses one
    cluster and a separated arm; notes fewer than 20 clusters."""
    y, x = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    codes, clusters = _cluster_codes(groups)
    if clusters < 2:
        return not_estimable(clusters, f"{clusters} cluster(s): GEE needs at least 2")
    sep = separation(y, x)
    if sep:
        return not_estimable(clusters, sep)
    res, extra = _fit(y, x, codes, cov_struct, cov_type)
    if res.problem:
        return not_estimable(clusters, f"the GEE {res.problem}")
    beta, se = float(res.params[1]), float(res.bse[1])
    note = f"few clusters (G={clusters})" if clusters < 20 else ""
    return OddsRatio(beta, se, wald_p(beta, se), clusters, note, extra)


def gee_clustered(y: Sequence[float] | Array, x: Sequence[float] | Array,
                  worlds: Sequence[Any] | Array,
                  cov_struct: str = "exchangeable") -> OddsRatio:
    """Odds ratio of binary ``x`` from a logit GEE with groups = ``worlds`` (one label per
    episode: the world, or whichever cluster the caller chose), the bias-reduced covariance,
    and p and interval on t(G − 2) — two parameters, intercept and x. ``df`` and ``clusters``
    travel in the result so every row can print them. Refuses G < MIN_CLUSTERS and a separated
    arm."""
    y, x = np.asarray(y, dtype=float), np.asarray(x, dtype=float)
    codes, clusters = cluster_codes(worlds, len(y))
    if clusters < MIN_CLUSTERS:
        return not_estimable(clusters, f"G={clusters} cluster(s): a clustered GEE needs at "
                                       f"least {MIN_CLUSTERS}")
    sep = separation(y, x)
    if sep:
        return not_estimable(clusters, sep)
    res, extra = _fit(y, x, codes, cov_struct, "bias_reduced")
    if res.problem:
        return not_estimable(clusters, f"the GEE {res.problem}")
    beta, se, df = float(res.params[1]), float(res.bse[1]), float(clusters - 2)
    return OddsRatio(beta, se, wald_p(beta, se, df), clusters, "", extra, df)


def firth_logit(y: Array, X: Array, trials: Array | None = None, maxiter: int = 200,
                tol: float = 1e-10) -> tuple[Array, Array]:
    """Firth's penalised logistic regression (finite under separation): coefficients and
    their SE from the information at the penalised estimate. On a 2×2 table it gives the
    Haldane odds ratio (½ added to every cell)."""
    y, X = np.asarray(y, dtype=float), np.asarray(X, dtype=float)
    n = np.ones(len(y)) if trials is None else np.asarray(trials, dtype=float)
    beta = np.zeros(X.shape[1])
    for _ in range(maxiter):
        mu = special.expit(X @ beta)
        w = n * mu * (1 - mu)
        inv = np.linalg.inv(X.T @ (X * w[:, None]))
        hat = w * np.einsum("ij,jk,ik->i", X, inv, X)
        step = inv @ (X.T @ (y - n * mu + hat * (0.5 - mu)))
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            break
    mu = special.expit(X @ beta)
    inv = np.linalg.inv(X.T @ (X * (n * mu * (1 - mu))[:, None]))
    return beta, np.sqrt(np.diag(inv))
