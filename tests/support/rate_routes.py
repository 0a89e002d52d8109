"""Two independent computations of the world-clustered rate interval, for the ``rate`` reference
values of tests/fixtures/stats_vectors.json (written by support/clustered_routes.py).

The interval (docs/analysis.md, "Rates"): the μ where (rate − μ)² ≤ q²·μ(1 − μ)·(1 + (m̃ − 1)·
ρ̃(μ)) / n_kish, q² = z²·K/(K − 1), m̃ = Σm²/N, n_kish = (Σw)²/Σw², and ρ̃(μ) the intra-world
correlation of the beta-binomial model that maximises the likelihood of the per-world counts
with the mean held at μ. Neither route calls LIMBO:

* by library: the log-likelihood from ``scipy.stats.betabinom``, ρ̃ as the root of its
  derivative written with digamma functions in θ = (1 − ρ)/ρ (``scipy.optimize.brentq``), the
  interval's ends by ``brentq`` after a scan of 25 points;
* by hand: plain Python — the likelihood as sums of logarithms, its derivative in log(ρ/(1 − ρ))
  by hand, every root by bisection, the ends after a scan of 17 points.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special
from scipy.stats import betabinom, norm

Z = float(norm.ppf(0.975))

# Six worlds of unequal size (episodes, duplicates); worlds 2k and 2k+1 share template k.
SIX = {"sizes": [8, 5, 12, 6, 9, 4], "successes": [6, 1, 9, 0, 7, 2],
       "templates": [0, 0, 1, 1, 2, 2]}
# A rare, lumpy outcome: sixteen worlds of 20 episodes, duplicates in two of them.
RARE = {"sizes": [20] * 16, "successes": [5, 2] + [0] * 14, "templates": [0] * 8 + [1] * 8}


def design(data: dict[str, list[int]], weighted: bool) -> dict[str, float]:
    """rate, n_kish, deff_w, m̃, K and q² of the data (template weights: 1 / template size)."""
    m, y, tpl = data["sizes"], data["successes"], data["templates"]
    n = sum(m)
    size = {t: sum(mk for mk, tk in zip(m, tpl, strict=True) if tk == t) for t in set(tpl)}
    w = [1 / size[t] if weighted else 1.0 for t, mk in zip(tpl, m, strict=True) for _ in range(mk)]
    hits = [1 if i < yk else 0 for mk, yk in zip(m, y, strict=True) for i in range(mk)]
    rate = sum(wi * yi for wi, yi in zip(w, hits, strict=True)) / sum(w)
    kish = sum(w) ** 2 / sum(wi * wi for wi in w)
    k = len(m)
    return {"rate": rate, "n_kish": kish, "deff_w": n / kish, "m_tilde": sum(v * v for v in m) / n,
            "clusters": k, "q2": Z * Z * k / (k - 1)}


def _wilson(p: float, n: float, q2: float) -> tuple[float, float]:
    centre = (p + q2 / (2 * n)) / (1 + q2 / n)
    half = math.sqrt(q2 * (p * (1 - p) / n + q2 / (4 * n * n))) / (1 + q2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# -- by library ----------------------------------------------------------------------------

def icc_library(mu: float, m: list[int], y: list[int]) -> float:
    def llf(theta: float) -> float:
        return float(betabinom.logpmf(y, m, mu * theta, (1 - mu) * theta).sum())

    def slope(log_theta: float) -> float:  # ∂ℓ/∂θ
        t = math.exp(log_theta)
        a, b = mu * t, (1 - mu) * t
        yy, mm = np.array(y, float), np.array(m, float)
        return float((mu * (special.digamma(yy + a) - special.digamma(a))
                      + (1 - mu) * (special.digamma(mm - yy + b) - special.digamma(b))
                      - (special.digamma(mm + t) - special.digamma(t))).sum())

    grid = np.linspace(-20.0, 16.0, 37)  # log θ; θ large is ρ near 0 (here down to 1e-7)
    values = [llf(math.exp(v)) for v in grid]
    best = int(np.argmax(values))
    binomial = float(sum(special.xlogy(yk, mu) + special.xlogy(mk - yk, 1 - mu)
                         + math.log(math.comb(mk, yk)) for mk, yk in zip(m, y, strict=True)))
    if best == len(grid) - 1 or binomial >= values[best] or slope(grid[best + 1]) > 0:
        return 0.0  # still rising towards the binomial: ρ̃ = 0 (to within 1e-7)
    root = optimize.brentq(slope, grid[best - 1], grid[best + 1], xtol=1e-14, rtol=1e-15)
    return 1 / (1 + math.exp(root))


def library(m: list[int], y: list[int], rate: float, n_kish: float) -> tuple[float, float, float]:
    """(lo, hi, ρ at the rate) by the library route, for worlds of m episodes, y successes."""
    k, n = len(m), sum(m)
    q2, m_tilde = Z * Z * k / (k - 1), sum(v * v for v in m) / n
    if all(yk in (0, mk) for mk, yk in zip(m, y, strict=True)):  # no world mixed: ρ = 1
        return (*_wilson(rate, n_kish / m_tilde, q2), 1.0)

    def excess(mu: float) -> float:
        deff = 1 + (m_tilde - 1) * icc_library(mu, m, y)
        return q2 * mu * (1 - mu) * deff / n_kish - (rate - mu) ** 2

    lo0, hi0 = _wilson(rate, n_kish, q2)
    lo1, hi1 = _wilson(rate, n_kish / m_tilde, q2)
    ends = []
    for inner, outer in ((lo0, lo1), (hi0, hi1)):
        scan = np.linspace(inner, outer, 25)
        values = [excess(float(v)) for v in scan]
        last = max([0] + [i for i, v in enumerate(values) if v >= 0])
        if last == 24 or values[last] < 0:  # the ρ = 1 end, or the ρ = 0 end within rounding
            ends.append(outer if last == 24 else inner)
            continue
        ends.append(optimize.brentq(excess, scan[last], scan[last + 1], xtol=1e-15, rtol=1e-15))
    return ends[0], ends[1], icc_library(rate, m, y)


def interval_library(data: dict[str, list[int]], weighted: bool) -> dict[str, float]:
    d = design(data, weighted)
    lo, hi, rho = library(data["sizes"], data["successes"], d["rate"], d["n_kish"])
    deff_c = 1 + (d["m_tilde"] - 1) * rho
    return {"icc": rho, "deff_c": deff_c, "deff_w": d["deff_w"], "rate": d["rate"],
            "n_eff": d["n_kish"] / deff_c, "lo": lo, "hi": hi}


def clustered(hits: list[bool], weights: list[float], clusters: list[object]
              ) -> tuple[float, float, float, float]:
    """(rate, lo, hi, n_eff) of episodes: the weighted rate, Kish's n, and the interval of the
    per-cluster counts by the library route — a table cell recomputed from its records."""
    total = sum(weights)
    rate = sum(w for w, y in zip(weights, hits, strict=True) if y) / total
    kish = total * total / sum(w * w for w in weights)
    size: dict[object, int] = {}
    count: dict[object, int] = {}
    for y, key in zip(hits, clusters, strict=True):
        size[key] = size.get(key, 0) + 1
        count[key] = count.get(key, 0) + bool(y)
    keys = sorted(size, key=str)
    m, y = [size[key] for key in keys], [count[key] for key in keys]
    lo, hi, rho = library(m, y, rate, kish)
    m_tilde = sum(v * v for v in m) / len(hits)
    return rate, lo, hi, kish / (1 + (m_tilde - 1) * rho)


# -- by hand -------------------------------------------------------------------------------

def _loglik(mu: float, u: float, m: list[int], y: list[int]) -> float:
    """Σ_k [Σ_{i<y} log(μ + iγ) + Σ_{i<m−y} log(1 − μ + iγ) − Σ_{i<m} log(1 + iγ)], γ = e^u."""
    g = math.exp(u)
    return sum(sum(math.log(mu + i * g) for i in range(yk))
               + sum(math.log(1 - mu + i * g) for i in range(mk - yk))
               - sum(math.log(1 + i * g) for i in range(mk)) for mk, yk in zip(m, y, strict=True))


def _slope(mu: float, u: float, m: list[int], y: list[int]) -> float:
    """∂ℓ/∂u = γ·∂ℓ/∂γ."""
    g = math.exp(u)
    return g * sum(sum(i / (mu + i * g) for i in range(yk))
                   + sum(i / (1 - mu + i * g) for i in range(mk - yk))
                   - sum(i / (1 + i * g) for i in range(mk)) for mk, yk in zip(m, y, strict=True))


def _bisect(f: Any, a: float, b: float, steps: int = 200) -> float:
    """The sign change of f in [a, b] (f(a) and f(b) of opposite sign), by halving."""
    fa = f(a)
    for _ in range(steps):
        mid = (a + b) / 2
        if mid in (a, b):
            break
        if (f(mid) >= 0) == (fa >= 0):
            a, fa = mid, f(mid)
        else:
            b = mid
    return (a + b) / 2


def icc_by_hand(mu: float, m: list[int], y: list[int]) -> float:
    grid = [-30.0 + i for i in range(51)]  # u = log(ρ / (1 − ρ)) from −30 to 20
    values = [_loglik(mu, u, m, y) for u in grid]
    best = values.index(max(values))
    binomial = sum(yk * math.log(mu) + (mk - yk) * math.log(1 - mu)
                   for mk, yk in zip(m, y, strict=True))
    if best == 0 or binomial >= values[best]:
        return 0.0
    u = _bisect(lambda v: _slope(mu, v, m, y), grid[best - 1], grid[best + 1])
    return 1 / (1 + math.exp(-u))


def interval_by_hand(data: dict[str, list[int]], weighted: bool) -> dict[str, float]:
    d = design(data, weighted)
    m, y = data["sizes"], data["successes"]

    def excess(mu: float) -> float:
        deff = 1 + (d["m_tilde"] - 1) * icc_by_hand(mu, m, y)
        return d["q2"] * mu * (1 - mu) * deff / d["n_kish"] - (d["rate"] - mu) ** 2

    lo0, hi0 = _wilson(d["rate"], d["n_kish"], d["q2"])
    lo1, hi1 = _wilson(d["rate"], d["n_kish"] / d["m_tilde"], d["q2"])
    ends = []
    for inner, outer in ((lo0, lo1), (hi0, hi1)):
        scan = [inner + (outer - inner) * i / 16 for i in range(17)]
        values = [excess(v) for v in scan]
        last = max([0] + [i for i, v in enumerate(values) if v >= 0])
        if last == 16 or values[last] < 0:  # the ρ = 1 end, or the ρ = 0 end within rounding
            ends.append(outer if last == 16 else inner)
            continue
        ends.append(_bisect(excess, scan[last], scan[last + 1]))
    rho = icc_by_hand(d["rate"], m, y)
    deff_c = 1 + (d["m_tilde"] - 1) * rho
    return {"icc": rho, "deff_c": deff_c, "deff_w": d["deff_w"], "rate": d["rate"],
            "n_eff": d["n_kish"] / deff_c, "lo": ends[0], "hi": ends[1]}
