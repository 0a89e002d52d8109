"""The statistics behind the tables: pure functions over counts or arrays, no I/O.

Each function states what it computes; the formulas, library calls and pitfalls follow
``reference/stats.md`` and its reference values are asserted in ``tests/test_analysis_stats.py``.
Guards are behaviour: an empty cell gives NaN (printed "—"), never 0; a model that cannot be
estimated (one cluster, an arm at 0% or 100%) says so instead of returning a number.

This module keeps rates, the mixed-effects fits and the Shapley decomposition. Paired tests are
in :mod:`~limbo.analysis.paired`, equivalence in :mod:`~limbo.analysis.tost`, GEE in
:mod:`~limbo.analysis.gee`, and what clustering by world changes (``reference/stats.md`` §8) in
:mod:`~limbo.analysis.cluster` and :mod:`~limbo.analysis.bootstrap`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from limbo.analysis import dist

# Moved to their own modules; named here (``as``: an explicit re-export) so that existing
# ``from limbo.analysis.stats import ...`` lines keep working.
from limbo.analysis.gee import OddsRatio as OddsRatio
from limbo.analysis.gee import firth_logit as firth_logit
from limbo.analysis.gee import gee_odds_ratio as gee_odds_ratio
from limbo.analysis.gee import separation as separation
from limbo.analysis.gee import wald_p
from limbo.analysis.paired import McNemar as McNemar
from limbo.analysis.paired import discordant as discordant
from limbo.analysis.paired import holm as holm
from limbo.analysis.paired import mcnemar_exact as mcnemar_exact
from limbo.analysis.tost import Tost as Tost
from limbo.analysis.tost import proportion_difference_ci as proportion_difference_ci
from limbo.analysis.tost import tost_paired as tost_paired
from limbo.analysis.tost import tost_two_proportions as tost_two_proportions

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
    z = float(dist.ppf(1 - alpha / 2))
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


# -- mixed-effects logistic model (maximum likelihood) --------------------------------------

@dataclass(frozen=True)
class GlmmFit:
    """A random-intercept logistic model fitted by maximum likelihood."""

    params: Array
    se: Array
    sigmas: Array
    llf: float
    singular: tuple[bool, ...]
    """Per random factor: σ at the boundary (< 1e-4), dropped from the Hessian."""

    def odds_ratio(self, column: int, clusters: int) -> OddsRatio:
        beta, se = float(self.params[column]), float(self.se[column])
        note = "singular fit (a random-effect SD is 0)" if any(self.singular) else ""
        return OddsRatio(beta, se, wald_p(beta, se), clusters, note,
                         {"sigma": float(self.sigmas[0]), "llf": self.llf})


def _codes(groups: Sequence[Any] | Array) -> tuple[Array, int]:
    codes = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)[1]
    return codes.astype(np.intp), int(codes.max()) + 1


def _bernoulli(y: Array, n: Array, eta: Array) -> Array:
    """Bernoulli log-likelihood of each row (y successes of n at logit eta), without the
    binomial coefficient — collapsed rows then give the row-level likelihood."""
    llf: Array = y * special.log_expit(eta) + (n - y) * special.log_expit(-eta)
    return llf


def _cluster_modes(y: Array, n: Array, eta: Array, codes: Array, g: int,
                   sigma: float) -> tuple[Array, Array]:
    """Per-cluster mode of the integrand over the random intercept, and its curvature."""
    b = np.zeros(g)
    for _ in range(100):
        mu = special.expit(eta + b[codes])
        grad = np.bincount(codes, y - n * mu, g) - b / sigma**2
        curv = np.bincount(codes, n * mu * (1 - mu), g) + 1 / sigma**2
        step = grad / curv
        b = b + step
        if np.max(np.abs(step)) < 1e-12:
            break
    mu = special.expit(eta + b[codes])
    return b, np.bincount(codes, n * mu * (1 - mu), g) + 1 / sigma**2


def agq_loglik(theta: Array, y: Array, n: Array, X: Array, codes: Array, g: int,
               nagq: int = 25) -> float:
    """Marginal log-likelihood of a random-intercept logit at θ = (β, log σ) by adaptive
    Gauss–Hermite quadrature with ``nagq`` nodes per cluster (nagq = 1 is Laplace)."""
    beta, sigma = theta[:-1], math.exp(theta[-1])
    eta = X @ beta
    mode, curv = _cluster_modes(y, n, eta, codes, g, sigma)
    scale = 1 / np.sqrt(curv)
    nodes, weights = np.polynomial.hermite_e.hermegauss(nagq)
    b = mode + scale * nodes[:, None]  # every node of every cluster at once: nagq × g
    member = np.zeros((len(codes), g))
    member[np.arange(len(codes)), codes] = 1.0
    terms = (_bernoulli(y, n, eta + b[:, codes]) @ member
             - b**2 / (2 * sigma**2) - 0.5 * math.log(2 * math.pi * sigma**2)
             + (np.log(weights) + nodes * nodes / 2)[:, None])
    return float(np.sum(np.log(scale) + special.logsumexp(terms, axis=0)))


def _start(y: Array, n: Array, X: Array) -> Array:
    """Ordinary logistic estimates (a few IRLS steps) as the starting point."""
    beta = np.zeros(X.shape[1])
    for _ in range(25):
        mu = special.expit(X @ beta)
        w = n * mu * (1 - mu) + 1e-9
        beta = beta + np.linalg.solve(X.T @ (X * w[:, None]), X.T @ (y - n * mu))
    return beta


def _ml_fit(negllf: Any, theta0: Array, k_beta: int) -> tuple[Array, Array, tuple[bool, ...]]:
    """BFGS on −llf (3-point numeric gradient), SE from the numeric Hessian; a σ that hits
    the boundary is fixed there and left out of the Hessian."""
    from scipy import optimize  # here: only the mixed model fits (Table 12), and it costs 0.3 s
    from statsmodels.tools.numdiff import approx_hess3

    res = optimize.minimize(negllf, theta0, method="BFGS", jac="3-point",
                            options={"gtol": 1e-8, "maxiter": 2000})
    theta = res.x
    singular = tuple(bool(math.exp(v) < 1e-4) for v in theta[k_beta:])
    free = [i for i in range(len(theta)) if i < k_beta or not singular[i - k_beta]]

    def sub(values: Array) -> float:
        full = theta.copy()
        full[free] = values
        return float(negllf(full))

    cov = np.linalg.inv(approx_hess3(theta[free], sub))
    se = np.full(len(theta), np.nan)
    se[free] = np.sqrt(np.diag(cov))
    return theta, se, singular


def glmm_agq(y: Sequence[float] | Array, X: Array, groups: Sequence[Any] | Array,
             trials: Sequence[float] | Array | None = None, nagq: int = 25) -> GlmmFit:
    """Random-intercept logistic model y ~ X + (1 | groups) by maximum likelihood with
    adaptive Gauss–Hermite quadrature (lme4's ``glmer(nAGQ=nagq)``). ``trials`` lets rows be
    collapsed cells (y successes of ``trials``); the likelihood is the Bernoulli one."""
    y, X = np.asarray(y, dtype=float), np.asarray(X, dtype=float)
    n = np.ones(len(y)) if trials is None else np.asarray(trials, dtype=float)
    codes, g = _codes(groups)
    k = X.shape[1]

    def negllf(theta: Array) -> float:
        return -agq_loglik(theta, y, n, X, codes, g, nagq)

    theta, se, singular = _ml_fit(negllf, np.append(_start(y, n, X), 0.0), k)
    return GlmmFit(theta[:k], se[:k], np.exp(theta[k:]), -negllf(theta), singular)


def laplace_loglik(theta: Array, y: Array, n: Array, X: Array,
                   factors: list[tuple[Array, int]]) -> float:
    """Laplace-approximate marginal log-likelihood of y ~ X + Σ_k (1 | factor_k) at
    θ = (β, log σ_1 … log σ_K); nested or crossed factors, dense Newton on the modes."""
    k_beta = X.shape[1]
    beta, sig = theta[:k_beta], np.exp(theta[k_beta:])
    offsets = np.cumsum([0] + [g for _, g in factors])
    q = int(offsets[-1])
    cols = [codes + off for (codes, _), off in zip(factors, offsets, strict=False)]
    prec = np.concatenate([np.full(g, 1 / s**2) for (_, g), s in zip(factors, sig, strict=True)])
    eta0, u = X @ beta, np.zeros(q)
    for _ in range(100):
        eta = eta0 + sum(u[c] for c in cols)
        mu = special.expit(eta)
        a = _zwz(cols, n * mu * (1 - mu), q) + np.diag(prec)
        grad = sum(np.bincount(c, y - n * mu, q) for c in cols) - prec * u
        step = np.linalg.solve(a, grad)
        u = u + step
        if np.max(np.abs(step)) < 1e-12:
            break
    eta = eta0 + sum(u[c] for c in cols)
    mu = special.expit(eta)
    a = _zwz(cols, n * mu * (1 - mu), q) + np.diag(prec)
    logdet = np.linalg.slogdet(a)[1]
    return float(_bernoulli(y, n, eta).sum() - 0.5 * np.sum(prec * u * u)
                 + 0.5 * np.sum(np.log(prec)) - 0.5 * logdet)


def _zwz(cols: list[Array], w: Array, q: int) -> Array:
    """Zᵀ diag(w) Z for the indicator design of the random intercepts."""
    out = np.zeros(q * q)
    for ci in cols:
        for cj in cols:
            out += np.bincount(ci * q + cj, w, q * q)
    return out.reshape(q, q)


def glmm_laplace(y: Sequence[float] | Array, X: Array, factors: list[Sequence[Any] | Array],
                 trials: Sequence[float] | Array | None = None) -> GlmmFit:
    """y ~ X + (1 | f_1) + … + (1 | f_K) by maximum likelihood under the Laplace
    approximation (lme4's default), for a few hundred random-effect levels at most."""
    y, X = np.asarray(y, dtype=float), np.asarray(X, dtype=float)
    n = np.ones(len(y)) if trials is None else np.asarray(trials, dtype=float)
    coded = [_codes(f) for f in factors]
    k = X.shape[1]

    def negllf(theta: Array) -> float:
        return -laplace_loglik(theta, y, n, X, coded)

    theta0 = np.concatenate([_start(y, n, X), np.zeros(len(coded))])
    theta, se, singular = _ml_fit(negllf, theta0, k)
    return GlmmFit(theta[:k], se[:k], np.exp(theta[k:]), -negllf(theta), singular)


# -- explained variance --------------------------------------------------------------------

@dataclass(frozen=True)
class Shapley:
    """McFadden's pseudo-R² of the full model and each factor group's Shapley share."""

    total_r2: float
    phi: dict[str, float]
    share: dict[str, float]
    r2: dict[tuple[str, ...], float]
    """R² of every subset of factor groups."""


def _llf(y: Array, n: Array, eta: Array) -> float:
    mu = special.expit(eta)
    return float(np.sum(special.xlogy(y, mu) + special.xlogy(n - y, 1 - mu)))


def bernoulli_llf(y: Array, n: Array, X: Array, maxiter: int = 200, tol: float = 1e-12) -> float:
    """Maximised Bernoulli log-likelihood of a main-effects logit on collapsed cells (y events
    of n per row): IRLS with step halving, until the log-likelihood gains less than ``tol``
    (relative). Under separation this is the finite supremum, fitted values reaching 0 or 1."""
    mu = (y + 0.5) / (n + 1)
    eta = special.logit(mu)
    beta_old, llf_old = None, -math.inf
    for _ in range(maxiter):
        w = n * mu * (1 - mu)
        z = eta + (y - n * mu) / np.where(w > 0, w, 1.0)
        root = np.sqrt(w)
        beta = np.linalg.lstsq(X * root[:, None], z * root, rcond=None)[0]
        llf = _llf(y, n, X @ beta)
        for _ in range(40):  # a Newton step can overshoot when a level is separated
            if beta_old is None or llf >= llf_old:
                break
            beta = (beta + beta_old) / 2
            llf = _llf(y, n, X @ beta)
        if llf - llf_old <= tol * max(1.0, abs(llf)):
            return max(llf, llf_old)
        beta_old, llf_old = beta, llf
        eta = X @ beta
        mu = special.expit(eta)
    return llf_old


def _design(cells: Any, factors: Sequence[str]) -> Array:
    import pandas as pd

    parts = [np.ones((len(cells), 1))]
    for name in factors:
        dummies = pd.get_dummies(cells[name].astype(str), drop_first=True, dtype=float)
        parts.append(dummies.to_numpy())
    return np.hstack(parts)


def shapley_r2(cells: Any, factors: Sequence[str], y: str = "y", n: str = "n") -> Shapley:
    """Shapley decomposition of McFadden's R² = 1 − ℓ(S)/ℓ₀ over factor groups, fitted on
    collapsed cells (a frame with one row per cell: the factors, ``y`` events of ``n``)."""
    cells = cells[cells[n] > 0]
    return shapley_fit(cells[y].to_numpy(float), cells[n].to_numpy(float),
                       shapley_designs(cells, factors), factors)


def shapley_designs(cells: Any, factors: Sequence[str]) -> dict[tuple[str, ...], Array]:
    """The design (intercept and treatment dummies) of every non-empty subset of ``factors``
    over ``cells``: built once, so a bootstrap refits the same cells with other counts (a cell
    with no episodes in a replicate adds nothing to the likelihood)."""
    varies = {f: cells[f].nunique() > 1 for f in factors}
    built: dict[tuple[str, ...], Array] = {}
    designs = {}
    for size in range(1, len(factors) + 1):
        for subset in itertools.combinations(factors, size):
            # A factor with one level adds no column: such subsets share one design (the same
            # object), which shapley_fit fits once — E1's one harness halves a bootstrap's work.
            effective = tuple(f for f in subset if varies[f])
            if effective not in built:
                built[effective] = _design(cells, effective)
            designs[subset] = built[effective]
    return designs


def shapley_fit(ys: Array, ns: Array, designs: dict[tuple[str, ...], Array],
                factors: Sequence[str]) -> Shapley:
    """:func:`shapley_r2` on counts ``ys`` of ``ns`` per cell and the cells' designs. ℓ₀ is the
    intercept-only Bernoulli log-likelihood; NaN everywhere when it is 0 (the outcome never
    or always happens)."""
    factors = list(factors)
    nan_result = Shapley(NAN, dict.fromkeys(factors, NAN), dict.fromkeys(factors, NAN), {})
    if ns.sum() == 0:
        return nan_result
    pbar = ys.sum() / ns.sum()
    ll0 = float(special.xlogy(ys.sum(), pbar) + special.xlogy(ns.sum() - ys.sum(), 1 - pbar))
    if ll0 == 0:
        return nan_result
    r2: dict[tuple[str, ...], float] = {(): 0.0}
    fitted: dict[int, float] = {}  # by design object: subsets sharing one are fitted once
    for subset, design in designs.items():
        if id(design) not in fitted:
            fitted[id(design)] = 1 - bernoulli_llf(ys, ns, design) / ll0
        r2[subset] = fitted[id(design)]
    phi = {f: _shapley_value(f, factors, r2) for f in factors}
    total = r2[tuple(factors)]
    share = {f: (phi[f] / total if total > 0 else NAN) for f in factors}
    return Shapley(total, phi, share, r2)


def _shapley_value(factor: str, factors: list[str], r2: dict[tuple[str, ...], float]) -> float:
    others = [f for f in factors if f != factor]
    k, value = len(factors), 0.0
    for size in range(len(others) + 1):
        weight = math.factorial(size) * math.factorial(k - size - 1) / math.factorial(k)
        for subset in itertools.combinations(others, size):
            with_f = tuple(f for f in factors if f in subset or f == factor)
            value += weight * (r2[with_f] - r2[tuple(f for f in factors if f in subset)])
    return value
