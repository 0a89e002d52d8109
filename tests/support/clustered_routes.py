"""Independent computations of the clustered statistics (``reference/stats.md`` §8), and the
``clustered`` reference values of tests/fixtures/stats_vectors.json they produce.

    cd tests && python -m support.clustered_routes [--check]

§8 came without reference values. Each one here is computed from literal counts by two
independent routes — a hand formula in plain Python, and a library or brute-force route (the
beta-binomial of scipy.stats for the rate interval, support/rate_routes.py; all 2^G sign flips;
a GEE and its Mancl–DeRouen covariance written out in numpy; an OLS with statsmodels'
cluster-robust covariance) — and the section is written only if
every pair agrees to 1e-10 (``--check`` compares with the file instead). Neither route calls
LIMBO's statistics: the tests assert those against the values written here, and call some routes
directly on other data. Values are rounded to 8 significant digits, as in the rest of the file;
none depends on a random-number stream.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import special
from scipy.stats import chi2
from scipy.stats import t as student

from support.rate_routes import RARE, SIX, interval_by_hand, interval_library

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stats_vectors.json"

# Ten worlds of paired outcomes: b_k pairs true under A only, c_k under B only.
FLIP = {"b": [4, 0, 3, 1, 5, 0, 2, 3, 0, 1], "c": [0, 2, 0, 1, 1, 0, 0, 1, 0, 0]}
# Eight worlds of paired episodes: m_k pairs, b_k A only, c_k B only (the rest concordant).
TOST = {"pairs": [10, 12, 8, 15, 9, 11, 10, 13], "b": [1, 0, 2, 1, 0, 1, 0, 2],
        "c": [0, 1, 1, 0, 1, 0, 0, 1], "margin": 0.05}


def sig(value: float) -> float:
    return float(f"{value:.8g}")


def agree(a: float, b: float, what: str) -> float:
    if not math.isclose(a, b, rel_tol=1e-10, abs_tol=1e-14):
        raise SystemExit(f"{what}: the two routes disagree: {a!r} vs {b!r}")
    return sig(a)


def rates() -> dict[str, Any]:
    """The world-clustered rate interval (support/rate_routes.py) on two data sets."""
    out: dict[str, Any] = {}
    for name, data, variants in (("six", SIX, (False, True)), ("rare", RARE, (False,))):
        out[name] = {"data": data}
        for weighted in variants:
            variant = "template_weights" if weighted else "unweighted"
            a, b = interval_library(data, weighted), interval_by_hand(data, weighted)
            out[name][variant] = {key: agree(a[key], b[key], f"{name} {variant} {key}")
                                  for key in a}
    return out


def flip_enumerated(d: list[int]) -> float:
    d = [v for v in d if v]
    t = abs(sum(d))
    hits = sum(abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= t
               for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def flip_convolved(d: list[int]) -> float:
    """The exact null distribution of Σ s_k d_k, built one world at a time."""
    dist = {0: Fraction(1)}
    for v in (v for v in d if v):
        new: dict[int, Fraction] = {}
        for total, prob in dist.items():
            for step in (v, -v):
                new[total + step] = new.get(total + step, Fraction(0)) + prob / 2
        dist = new
    t = abs(sum(d))
    return float(sum(p for total, p in dist.items() if abs(total) >= t))


def durkalski_by_counts(b: list[int], c: list[int]) -> tuple[float, float]:
    d = [bk - ck for bk, ck in zip(b, c, strict=True)]
    x2 = sum(d) ** 2 / sum(v * v for v in d)
    return x2, float(chi2.sf(x2, 1))


def durkalski_by_rows(b: list[int], c: list[int]) -> tuple[float, float]:
    rows = pd.DataFrame([{"world": k, "diff": s}
                         for k, (bk, ck) in enumerate(zip(b, c, strict=True))
                         for s in [1] * bk + [-1] * ck + [0]])  # one concordant pair each
    d = rows.groupby("world")["diff"].sum().to_numpy(float)
    x2 = float(d.sum() ** 2 / (d ** 2).sum())
    return x2, math.erfc(math.sqrt(x2 / 2))  # P(χ²₁ ≥ x) = P(|Z| ≥ √x)


def reduction() -> dict[str, Any]:
    """McNemar T1 (b = 12, c = 3) with one discordant pair per world: the sign-flip p is the
    exact McNemar p, Durkalski's X² the uncorrected McNemar χ² (statsmodels' own)."""
    from statsmodels.stats.contingency_tables import mcnemar

    d = [1] * 12 + [-1] * 3
    x2, p = durkalski_by_counts([1] * 12 + [0] * 3, [0] * 12 + [1] * 3)
    plain = mcnemar([[40, 12], [3, 45]], exact=False, correction=False)
    return {"b": 12, "c": 3,
            "p_sign_flip": agree(flip_enumerated(d), flip_convolved(d), "reduction sign flip"),
            "durkalski": agree(x2, float(plain.statistic), "reduction X2"),
            "p_durkalski": agree(p, float(plain.pvalue), "reduction p")}


def paired() -> dict[str, Any]:
    b, c = FLIP["b"], FLIP["c"]
    d = [bk - ck for bk, ck in zip(b, c, strict=True)]
    (x2a, pa), (x2b, pb) = durkalski_by_counts(b, c), durkalski_by_rows(b, c)
    return {"data": FLIP, "d": d, "statistic": abs(sum(d)), "worlds": sum(v != 0 for v in d),
            "p_sign_flip": agree(flip_enumerated(d), flip_convolved(d), "sign flip"),
            "durkalski": agree(x2a, x2b, "Durkalski X2"),
            "p_durkalski": agree(pa, pb, "Durkalski p"),
            "one_discordant_pair_per_world": reduction()}


def gee_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = json.loads(FIXTURE.read_text())["gee_exchangeable"]["data"]
    y: list[float] = []
    x: list[float] = []
    g: list[int] = []
    for inst in range(data["clusters"]):
        for arm, dups, n in ((0, data["A_dups"], data["A_n"]), (1, data["B_dups"], data["B_n"])):
            y += [1.0] * dups[inst] + [0.0] * (n[inst] - dups[inst])
            x += [float(arm)] * n[inst]
            g += [inst] * n[inst]
    return np.array(y), np.array(x), np.array(g)


def gee_statsmodels(y: np.ndarray, x: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    from statsmodels.genmod import cov_struct
    from statsmodels.genmod.families import Binomial
    from statsmodels.genmod.generalized_estimating_equations import GEE

    res = GEE(y, np.column_stack([np.ones(len(x)), x]), groups=g, family=Binomial(),
              cov_struct=cov_struct.Exchangeable()).fit(maxiter=500, ctol=1e-12,
                                                        cov_type="bias_reduced")
    return float(res.params[1]), float(res.bse[1])


def gee_by_hand(y: np.ndarray, x: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """Exchangeable logit GEE by Fisher scoring with α's moment estimate, then the
    Mancl–DeRouen covariance B⁻¹ [Σ Dᵢᵀ Vᵢ⁻¹ (I − Hᵢ)⁻¹ rᵢ rᵢᵀ (I − Hᵢ)⁻ᵀ Vᵢ⁻¹ Dᵢ] B⁻¹,
    Hᵢ = Dᵢ B⁻¹ Dᵢᵀ Vᵢ⁻¹."""
    design, beta, alpha = np.column_stack([np.ones(len(x)), x]), np.zeros(2), 0.0
    groups = [np.flatnonzero(g == k) for k in np.unique(g)]

    def parts(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mu = special.expit(design[idx] @ beta)
        a = np.sqrt(mu * (1 - mu))
        corr = np.full((len(idx), len(idx)), alpha) + (1 - alpha) * np.eye(len(idx))
        return y[idx] - mu, design[idx] * (a * a)[:, None], np.linalg.inv(np.outer(a, a) * corr)

    for _ in range(200):
        bmat, score = np.zeros((2, 2)), np.zeros(2)
        for idx in groups:
            r, dmat, vinv = parts(idx)
            bmat += dmat.T @ vinv @ dmat
            score += dmat.T @ vinv @ r
        beta = beta + np.linalg.solve(bmat, score)
        mu = special.expit(design @ beta)
        pearson = (y - mu) / np.sqrt(mu * (1 - mu))
        phi = (pearson ** 2).sum() / (len(y) - 2)
        pairs = sum(len(i) * (len(i) - 1) / 2 for i in groups)
        cross = sum((pearson[i].sum() ** 2 - (pearson[i] ** 2).sum()) / 2 for i in groups)
        alpha = cross / phi / (pairs - 2)
    bmat, meat = np.zeros((2, 2)), np.zeros((2, 2))
    for idx in groups:
        r, dmat, vinv = parts(idx)
        bmat += dmat.T @ vinv @ dmat
    binv = np.linalg.inv(bmat)
    for idx in groups:
        r, dmat, vinv = parts(idx)
        h = dmat @ binv @ dmat.T @ vinv
        u = dmat.T @ vinv @ np.linalg.solve(np.eye(len(idx)) - h, r)
        meat += np.outer(u, u)
    return float(beta[1]), float(math.sqrt((binv @ meat @ binv)[1, 1]))


def gee() -> dict[str, Any]:
    y, x, g = gee_rows()
    (beta_a, se_a), (beta_b, se_b) = gee_statsmodels(y, x, g), gee_by_hand(y, x, g)
    clusters = len(np.unique(g))
    df = clusters - 2
    tstat = beta_a / se_a
    p_scipy = float(2 * student.sf(abs(tstat), df))
    p_beta = float(special.betainc(df / 2, 0.5, df / (df + tstat * tstat)))
    q_a, q_b = float(student.ppf(0.975, df)), float(special.stdtrit(df, 0.975))
    return {"data": "gee_exchangeable", "clusters": clusters, "df": df,
            "beta_x": agree(beta_a, beta_b, "GEE beta"),
            "se_bias_reduced": agree(se_a, se_b, "GEE SE"),
            "p_t": agree(p_scipy, p_beta, "GEE t p"),
            "OR_lo": agree(math.exp(beta_a - q_a * se_a), math.exp(beta_b - q_b * se_b), "OR lo"),
            "OR_hi": agree(math.exp(beta_a + q_a * se_a), math.exp(beta_b + q_b * se_b), "OR hi")}


def tost_by_hand() -> dict[str, float]:
    m, b, c, margin = TOST["pairs"], TOST["b"], TOST["c"], TOST["margin"]
    n, k = sum(m), len(m)
    big_d = [bk - ck for bk, ck in zip(b, c, strict=True)]
    delta = sum(big_d) / n
    spread = sum((dk - delta * mk) ** 2 for dk, mk in zip(big_d, m, strict=True))
    se = math.sqrt(k / (k - 1) * spread) / n
    q = float(student.ppf(0.95, k - 1))
    p_lower = float(student.sf((delta + margin) / se, k - 1))
    p_upper = float(student.cdf((delta - margin) / se, k - 1))
    return {"diff": delta, "se": se, "p_lower": p_lower, "p_upper": p_upper,
            "p_tost": max(p_lower, p_upper), "ci90_lo": delta - q * se, "ci90_hi": delta + q * se}


def tost_by_ols() -> dict[str, float]:
    """The mean of the paired differences as an intercept-only OLS with statsmodels'
    cluster-robust covariance (its G/(G−1) correction; (N−1)/(N−k) is 1 with k = 1) and t(G−1)."""
    import statsmodels.api as sm

    d, g = [], []
    for k, (mk, bk, ck) in enumerate(zip(TOST["pairs"], TOST["b"], TOST["c"], strict=True)):
        d += [1.0] * bk + [-1.0] * ck + [0.0] * (mk - bk - ck)
        g += [k] * mk
    res = sm.OLS(np.array(d), np.ones((len(d), 1))).fit(cov_type="cluster", use_t=True,
                                                         cov_kwds={"groups": np.array(g)})
    delta, se, margin = float(res.params[0]), float(res.bse[0]), TOST["margin"]
    lower = res.t_test((np.array([[1.0]]), np.array([-margin])))  # its t, read one-sided
    upper = res.t_test((np.array([[1.0]]), np.array([margin])))
    df = float(lower.df_denom)
    lo, hi = res.conf_int(alpha=0.10)[0]
    p_lower = float(student.sf(float(lower.tvalue[0][0]), df))
    p_upper = float(student.cdf(float(upper.tvalue[0][0]), df))
    return {"diff": delta, "se": se, "p_lower": p_lower, "p_upper": p_upper,
            "p_tost": max(p_lower, p_upper), "ci90_lo": float(lo), "ci90_hi": float(hi)}


def tost() -> dict[str, Any]:
    a, b = tost_by_hand(), tost_by_ols()
    return {"data": TOST, "clusters": len(TOST["pairs"]), "df": len(TOST["pairs"]) - 1,
            **{key: agree(a[key], b[key], f"TOST {key}") for key in a}}


def section() -> dict[str, Any]:
    return {"_note": "stats.md §8; every value computed two independent ways "
                     "(tests/support/clustered_routes.py), agreeing to 1e-10",
            "rate": rates(), "paired": paired(), "gee_bias_reduced_t": gee(), "tost_paired": tost()}


def main(argv: list[str]) -> int:
    data = json.loads(FIXTURE.read_text())
    fresh = section()
    if "--check" in argv:
        same = data.get("clustered") == fresh
        print("clustered vectors " + ("match" if same else "DIFFER from") + f" {FIXTURE}")
        return 0 if same else 1
    data["clustered"] = fresh
    FIXTURE.write_text(json.dumps(data, indent=1))
    print(f"wrote the clustered section of {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
