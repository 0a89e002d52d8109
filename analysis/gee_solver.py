"""The logit GEE behind :mod:`.gee`'s odds ratios: statsmodels' estimating equations and
covariances for ``GEE(family=Binomial())``, solved in numpy.

Why not statsmodels itself: importing its GEE imports scipy.stats (its working-correlation module
does), 0.5–0.8 s of CPU that ``limbo tables`` and the report paid for two small fits. The
numbers are statsmodels' (tests/test_gee_solver.py compares them on random data sets, and the
reference values of ``reference/stats.md`` hold), because the same steps are taken:

* the start is the ordinary logistic fit (statsmodels starts from its GLM fit; the iteration
  forgets its start, as both converge to the same fixed point);
* each iteration takes one Fisher-scoring step of the mean parameters under the current
  working correlation, stops once the norm of the score before the step is below ``ctol`` and
  the correlation has been estimated at least once, and else re-estimates the exchangeable α
  from Pearson residuals, both sums corrected by p degrees of freedom as statsmodels does;
* the covariances are its naive (model-based; the binomial scale is 1), robust (sandwich) and
  ``bias_reduced`` (Mancl–DeRouen) ones.

Where statsmodels hands back a degenerate fit — no convergence, an exchangeable α that is no
correlation for the largest cluster, fitted probabilities saturated to a standard error of 0, a
singular bias-reduced step — this says so in :attr:`GeeFit.problem` (and gives NaN standard
errors) instead of numbers: an odds ratio of 10¹¹⁹ with a p of 0 is what statsmodels printed for
an ordinary 149-episode, 11-world data set whose α iterated below −1/(n − 1).

The working covariance of a cluster is never formed: an exchangeable correlation has a closed
inverse (a multiple of the identity minus a multiple of the all-ones matrix), and the
Mancl–DeRouen step's (I − H_i)⁻¹ r_i is taken by the Woodbury identity on p × p matrices
instead of an n_i × n_i solve, so a world with thousands of episodes costs no more than a
small one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

Array = np.ndarray
EPS = float(np.finfo(float).eps)
COV_TYPES = ("robust", "naive", "bias_reduced")


@dataclass(frozen=True)
class GeeFit:
    params: Array
    bse: Array
    """Standard errors from the covariance asked for."""
    alpha: float
    """The exchangeable working correlation (0 under independence)."""
    problem: str = ""
    """Why the fit gives no usable estimate ("" when it does): then ``bse`` is NaN."""


class _Clusters:
    """Rows sorted by cluster: the group sums and the per-row view of per-cluster values."""

    def __init__(self, codes: Array) -> None:
        self.codes = codes
        self.sizes = np.bincount(codes).astype(float)
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(codes))[:-1]])

    def sums(self, values: Array) -> Array:
        return np.add.reduceat(values, self.starts, axis=0)

    def solve(self, alpha: float, sdev: Array, rhs: Array) -> Array:
        """V⁻¹ rhs, cluster by cluster, for V = S R S with S = diag(``sdev``) and R the
        exchangeable correlation α (statsmodels' ``covariance_matrix_solve``, its steps)."""
        c = alpha / (1.0 - alpha) / (1.0 + alpha * (self.sizes - 1))
        scaled = rhs / (sdev if rhs.ndim == 1 else sdev[:, None])
        out = scaled / (1.0 - alpha)
        shift = c[:, None] * self.sums(scaled) if rhs.ndim > 1 else c * self.sums(scaled)
        out = out - shift[self.codes]
        solved: Array = out / (sdev if rhs.ndim == 1 else sdev[:, None])
        return solved


def fit(y: Array, X: Array, codes: Array, exchangeable: bool, cov_type: str,
        maxiter: int = 500, ctol: float = 1e-10) -> GeeFit:
    """The logit GEE of ``y`` on ``X`` clustered by ``codes`` (0…K−1, every cluster present)."""
    if cov_type not in COV_TYPES:
        raise ValueError(f"cov_type {cov_type!r}: one of {', '.join(COV_TYPES)}")
    order = np.argsort(codes, kind="stable")
    y, X, groups = y[order], X[order], _Clusters(codes[order])
    beta, alpha, estimated, converged = _logistic(y, X), 0.0, False, False
    for _ in range(maxiter):
        step, score = _scoring_step(y, X, beta, alpha, groups)
        beta = beta + step
        if np.sqrt(np.sum(score**2)) < ctol and estimated:
            converged = True
            break
        if exchangeable:
            alpha = _alpha(y, X, beta, groups)
        estimated = True
    problem = _problem(beta, alpha, groups, converged, maxiter)
    if not problem:
        try:
            bse = np.sqrt(np.diag(_covariance(y, X, beta, alpha, groups, cov_type)))
        except np.linalg.LinAlgError:
            problem = ("degenerated: a singular covariance (fitted probabilities of 0 or 1, or "
                       "one world holding a parameter alone)")
        else:
            if not np.all(np.isfinite(bse) & (bse > 0)):
                problem = "degenerated: a standard error of 0 (fitted probabilities of 0 or 1)"
    if problem:
        bse = np.full(len(beta), np.nan)
    return GeeFit(beta, bse, alpha, problem)


def _problem(beta: Array, alpha: float, groups: _Clusters, converged: bool, maxiter: int) -> str:
    """Why the iteration's end is no estimate, or ""."""
    if not converged:
        return f"did not converge in {maxiter} iterations"
    if not np.all(np.isfinite(beta)):
        return "diverged"
    largest = float(groups.sizes.max())
    if not -1.0 / max(largest - 1.0, 1.0) < alpha < 1.0:
        return (f"ended with a working correlation α = {alpha:.3g}, no correlation for a world of "
                f"{largest:.0f} episodes")
    return ""


def _means(X: Array, beta: Array) -> tuple[Array, Array, Array]:
    """μ, dμ/dβ (one row per episode) and the binomial SD √(μ(1 − μ)), μ clipped as statsmodels
    clips it."""
    mu = special.expit(X @ beta)
    d = X * (mu * (1.0 - mu))[:, None]
    clipped = np.clip(mu, EPS, 1.0 - EPS)
    return mu, d, np.sqrt(clipped * (1.0 - clipped))


def _scoring_step(y: Array, X: Array, beta: Array, alpha: float,
                  groups: _Clusters) -> tuple[Array, Array]:
    mu, d, sdev = _means(X, beta)
    bmat = d.T @ groups.solve(alpha, sdev, d)
    score = d.T @ groups.solve(alpha, sdev, y - mu)
    try:
        return np.linalg.solve(bmat, score), score
    except np.linalg.LinAlgError:
        return np.linalg.pinv(bmat) @ score, score


def _alpha(y: Array, X: Array, beta: Array, groups: _Clusters) -> float:
    """The exchangeable α by moments, as statsmodels' ``Exchangeable.update`` estimates it."""
    mu, _, sdev = _means(X, beta)
    resid = (y - mu) / sdev
    ssr = groups.sums(resid * resid)
    cross = float(np.sum((groups.sums(resid) ** 2 - ssr) / 2))
    nobs, ddof = len(y), int(X.shape[1])
    pairs = float(np.sum(0.5 * groups.sizes * (groups.sizes - 1)))
    scale = float(np.sum(ssr)) / (nobs * (nobs - ddof) / float(nobs))
    return cross / scale / (pairs * (pairs - ddof) / pairs)


def _covariance(y: Array, X: Array, beta: Array, alpha: float, groups: _Clusters,
                cov_type: str) -> Array:
    mu, d, sdev = _means(X, beta)
    resid = y - mu
    vinv_d = groups.solve(alpha, sdev, d)
    bmat = d.T @ vinv_d
    try:
        naive = np.linalg.inv(bmat)
    except np.linalg.LinAlgError:
        naive = np.linalg.pinv(bmat)
    if cov_type == "naive":
        return naive
    if cov_type == "bias_reduced":
        resid = _bias_reduced_residuals(d, vinv_d, resid, bmat, groups)
    u = groups.sums(d * groups.solve(alpha, sdev, resid)[:, None])
    cov: Array = naive @ (u.T @ u) @ naive
    return cov


def _bias_reduced_residuals(d: Array, vinv_d: Array, resid: Array, bmat: Array,
                            groups: _Clusters) -> Array:
    """(I − H_i)⁻¹ r_i for every cluster i, H_i = D_i C D_iᵀ V_i⁻¹ (C the naive covariance):
    by Woodbury, r_i + D_i (C⁻¹ − D_iᵀ V_i⁻¹ D_i)⁻¹ D_iᵀ V_i⁻¹ r_i, where C⁻¹ is the whole
    information matrix and D_iᵀ V_i⁻¹ D_i the cluster's share of it."""
    p = d.shape[1]
    share = groups.sums((d[:, :, None] * vinv_d[:, None, :]).reshape(len(d), p * p))
    lhs = bmat[None, :, :] - share.reshape(-1, p, p)
    rhs = groups.sums(vinv_d * resid[:, None])
    fix = np.linalg.solve(lhs, rhs[:, :, None])[:, :, 0]
    fixed: Array = resid + np.einsum("ij,ij->i", d, fix[groups.codes])
    return fixed


def _logistic(y: Array, X: Array, maxiter: int = 100, tol: float = 1e-12) -> Array:
    """Ordinary logistic regression by Newton's method: the GEE's starting point."""
    beta = np.zeros(X.shape[1])
    for _ in range(maxiter):
        mu = special.expit(X @ beta)
        w = mu * (1.0 - mu)
        step = np.linalg.solve(X.T @ (X * w[:, None]), X.T @ (y - mu))
        beta = beta + step
        if np.max(np.abs(step)) < tol:
            break
    return beta
