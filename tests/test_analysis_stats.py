"""Every reference value of ``reference/stats_vectors.json`` that the project computes, at the
tolerances of ``reference/stats.md``, through the project's own functions.

Entries not asserted, and why:
* ``bayes_mixed_glm`` — the reference marks it "not usable" for an odds ratio; the project
  fits the random-intercept model by maximum likelihood instead (asserted below).
* ``conditional_logit`` — a sanity check the reference suggests; the project has no table
  that uses a within-cluster odds ratio.
* ``shapley_separation.alternatives`` and ``ridge_total_r2`` — Firth / pseudo-count / ridge
  R² are the estimates the reference recommends *against*; the project uses extended ML.
* ``pitfall_aggregated_glm_pseudo_r2.wrong_*`` — the wrong number a pitfall produces
  (the right one is asserted).
* ``gee_edge_cases`` values — the nonsense GEE returns with one cluster or a separated arm;
  asserted here as behaviour instead: the project refuses or flags both.
* ``timing`` — wall-clock figures and shares of a random data set that is not in the file.
* ``versions`` — the verification environment.

The ``clustered`` section (stats.md §8 gave no values) is the project's own: each value computed
two independent ways by ``support/clustered_routes.py``, which a test here re-runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from limbo.analysis import stats

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "stats_vectors.json").read_text())
CLOSED = 1e-6
GEE = 1e-5
GLMM = 1e-4


def close(actual: float, expected: float, rtol: float) -> None:
    """Relative tolerance; an expected exact 0 must be 0 to 1e-12."""
    assert actual == pytest.approx(expected, rel=rtol, abs=1e-12 if expected == 0 else 0), (
        actual, expected)


@pytest.mark.parametrize("case", VECTORS["wilson"])
def test_wilson(case: dict) -> None:
    lo, hi = stats.wilson(case["x"], case["n"], case.get("alpha", 0.05))
    close(lo, case["lo"], CLOSED)
    close(hi, case["hi"], CLOSED)


def test_wilson_bounds_are_exact_at_zero_and_all() -> None:
    assert stats.wilson(0, 10)[0] == 0.0 and stats.wilson(10, 10)[1] == 1.0


def test_empty_cell_is_nan_not_zero() -> None:
    rate = stats.kish_rate([])
    assert math.isnan(rate.rate) and math.isnan(rate.lo) and rate.n == 0
    assert all(math.isnan(v) for v in stats.wilson(0, 0))


def test_kish_template_example() -> None:
    case = VECTORS["kish_template_example"]
    y, groups = [], []
    for t, (size, dups) in enumerate(zip(case["template_sizes"], case["template_dups"],
                                         strict=True)):
        y += [1] * dups + [0] * (size - dups)
        groups += [f"t{t}"] * size
    weighted = stats.kish_rate(y, stats.equal_weights(groups))
    close(weighted.rate, case["rate"], CLOSED)
    close(weighted.n_eff, case["n_eff"], CLOSED)
    close(weighted.lo, case["lo"], CLOSED)
    close(weighted.hi, case["hi"], CLOSED)
    assert weighted.successes == 17 and weighted.n == 100
    plain = stats.kish_rate(y)
    un = case["unweighted"]
    assert plain.n_eff == un["n"]
    close(plain.rate, un["rate"], CLOSED)
    close(plain.lo, un["lo"], CLOSED)
    close(plain.hi, un["hi"], CLOSED)


@pytest.mark.parametrize("name", sorted(VECTORS["mcnemar_exact"]))
def test_mcnemar_exact(name: str) -> None:
    case = VECTORS["mcnemar_exact"][name]
    result = stats.mcnemar_exact(case["b"], case["c"])
    assert result.statistic == case["statistic"]
    close(result.pvalue, case["pvalue"], CLOSED)
    table = case["table"]
    a = [True] * (table[0][0] + table[0][1]) + [False] * (table[1][0] + table[1][1])
    b = ([True] * table[0][0] + [False] * table[0][1] + [True] * table[1][0]
         + [False] * table[1][1])
    assert stats.discordant(a, b) == (case["b"], case["c"])


def test_holm() -> None:
    case = VECTORS["holm"]
    np.testing.assert_allclose(stats.holm(case["mcnemar_pvalues"]), case["holm_adjusted"],
                               rtol=CLOSED)
    np.testing.assert_allclose(stats.holm(case["literal_p"]), case["literal_holm"], rtol=CLOSED)
    assert not np.allclose(stats.holm(case["literal_p"]), case["literal_default_hs_NOT_holm"])


def test_holm_drops_nan_from_the_family() -> None:
    out = stats.holm([0.01, float("nan"), 0.03])
    assert math.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2]], [0.02, 0.03])


def gee_rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = VECTORS["gee_exchangeable"]["data"]
    y, x, g = [], [], []
    for inst in range(data["clusters"]):
        for arm, dups, n in (("A", data["A_dups"], data["A_n"]), ("B", data["B_dups"],
                                                                  data["B_n"])):
            y += [1] * dups[inst] + [0] * (n[inst] - dups[inst])
            x += [1 if arm == "B" else 0] * n[inst]
            g += [inst] * n[inst]
    return np.array(y, float), np.array(x, float), np.array(g)


def test_gee_exchangeable() -> None:
    ref = VECTORS["gee_exchangeable"]
    y, x, g = gee_rows()
    result = stats.gee_odds_ratio(y, x, g)
    check_odds_ratio(result, ref, GEE)
    close(result.extra["alpha"], ref["alpha_exch"], GEE)
    close(result.extra["intercept"], ref["intercept"], GEE)
    assert result.clusters == 12 and "few clusters" in result.note


def test_gee_other_covariances_and_independence() -> None:
    ref = VECTORS["gee_exchangeable"]
    y, x, g = gee_rows()
    reduced = stats.gee_odds_ratio(y, x, g, cov_type="bias_reduced")
    close(reduced.se, ref["se_x_bias_reduced"], GEE)
    close(reduced.pvalue, ref["p_bias_reduced"], GEE)
    close(stats.gee_odds_ratio(y, x, g, cov_type="naive").se, ref["se_x_naive"], GEE)
    ind = stats.gee_odds_ratio(y, x, g, cov_struct="independence")
    close(ind.beta, ref["independence"]["beta_x"], GEE)
    close(ind.se, ref["independence"]["se_x"], GEE)
    close(ind.pvalue, ref["independence"]["p"], GEE)


def test_gee_refuses_one_cluster_and_flags_separation() -> None:
    y, x, g = gee_rows()
    one = stats.gee_odds_ratio(y, x, np.zeros(len(y)))
    assert math.isnan(one.beta) and "at least 2" in one.note
    y_sep = np.where(x == 0, 0.0, y)  # every A episode without a duplicate
    sep = stats.gee_odds_ratio(y_sep, x, g)
    assert math.isnan(sep.odds_ratio) and "separation" in sep.note and "x=0" in sep.note


def collapsed() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The clustered data set as one row per (instance, arm)."""
    data = VECTORS["gee_exchangeable"]["data"]
    y, n, x, g = [], [], [], []
    for inst in range(data["clusters"]):
        y += [data["A_dups"][inst], data["B_dups"][inst]]
        n += [data["A_n"][inst], data["B_n"][inst]]
        x += [0, 1]
        g += [inst, inst]
    return np.array(y, float), np.array(n, float), np.array(x, float), np.array(g)


def check_odds_ratio(result: stats.OddsRatio, ref: dict, rtol: float) -> None:
    """β, SE, OR, its Wald interval and p against a reference entry."""
    lo, hi = result.ci()
    for got, key in ((result.beta, "beta_x"), (result.se, "se_x"), (result.odds_ratio, "OR"),
                     (lo, "OR_lo"), (hi, "OR_hi"), (result.pvalue, "p")):
        close(got, ref[key], rtol)


def test_glmm_agq25_matches_glmer() -> None:
    ref = VECTORS["glmm_random_intercept_ml"]
    y, n, x, g = collapsed()
    fit = stats.glmm_agq(y, np.column_stack([np.ones(len(x)), x]), g, trials=n, nagq=25)
    check_odds_ratio(fit.odds_ratio(1, clusters=12), ref, GLMM)
    close(fit.sigmas[0], ref["sigma"], GLMM)
    close(fit.params[0], ref["intercept"], GLMM)
    close(fit.llf, ref["llf"], GLMM)


def test_glmm_laplace_one_factor_is_agq_with_one_node() -> None:
    ref = VECTORS["glmm_random_intercept_ml"]["laplace"]
    y, n, x, g = collapsed()
    X = np.column_stack([np.ones(len(x)), x])
    for fit in (stats.glmm_agq(y, X, g, trials=n, nagq=1),
                stats.glmm_laplace(y, X, [g], trials=n)):
        close(fit.params[1], ref["beta_x"], GLMM)
        close(fit.se[1], ref["se_x"], GLMM)
        close(fit.sigmas[0], ref["sigma"], GLMM)
        close(fit.llf, ref["llf"], GLMM)


def test_glmm_nested_laplace() -> None:
    ref = VECTORS["glmm_nested_laplace"]
    y, n, x, g = collapsed()
    fit = stats.glmm_laplace(y, np.column_stack([np.ones(len(x)), x]), [g % 4, g], trials=n)
    check_odds_ratio(fit.odds_ratio(1, clusters=12), ref, GLMM)
    close(fit.sigmas[0], ref["sigma_template"], GLMM)
    close(fit.sigmas[1], ref["sigma_inst"], GLMM)
    assert list(fit.singular) == ref["boundary"]
    close(fit.llf, ref["llf"], GLMM)


def test_glmm_collapsed_equals_rows() -> None:
    y, n, x, g = collapsed()
    rows_y, rows_x, rows_g = gee_rows()
    X = np.column_stack([np.ones(len(x)), x])
    a = stats.glmm_agq(y, X, g, trials=n, nagq=5)
    b = stats.glmm_agq(rows_y, np.column_stack([np.ones(len(rows_x)), rows_x]), rows_g, nagq=5)
    assert a.llf == pytest.approx(b.llf, rel=1e-8)
    np.testing.assert_allclose(a.params, b.params, rtol=1e-5)


def test_firth_two_by_two_is_haldane() -> None:
    ref = VECTORS["firth_2x2"]
    beta, se = stats.firth_logit(np.array([0.0, 9.0]), np.array([[1.0, 1.0], [1.0, 0.0]]),
                                 trials=np.array([40.0, 40.0]))
    close(beta[1], ref["log_or"], CLOSED)
    close(math.exp(beta[1]), ref["OR"], CLOSED)
    assert se[1] > 0


@pytest.mark.parametrize("name", ["equivalent", "not_equivalent", "low_rates",
                                  "kish_fractional"])
@pytest.mark.parametrize("method", ["wald", "score"])
def test_tost_independent(name: str, method: str) -> None:
    case = VECTORS["tost"][name]
    ref = case[method]
    t = stats.tost_two_proportions(case["c1"], case["n1"], case["c2"], case["n2"],
                                   method=method)
    close(t.diff, case["diff"], CLOSED)
    close(t.pvalue, ref["p_tost"], CLOSED)
    close(t.ci_lo, ref["ci90"][0], CLOSED)
    close(t.ci_hi, ref["ci90"][1], CLOSED)
    if method == "wald":
        close(t.p_lower, ref["p_lower"], CLOSED)
        close(t.p_upper, ref["p_upper"], CLOSED)
    assert ref["duality_ok"]
    assert t.equivalent == (-0.05 < t.ci_lo and t.ci_hi < 0.05)


@pytest.mark.parametrize("name", ["equivalent", "not_equivalent", "low_rates",
                                  "kish_fractional"])
def test_statsmodels_default_methods_differ(name: str) -> None:
    """The pitfall values: the default test (agresti-caffo) and default interval (newcomb),
    reproduced by naming them — which the project never mixes."""
    case = VECTORS["tost"][name]
    ref = case["defaults"]
    t = stats.tost_two_proportions(case["c1"], case["n1"], case["c2"], case["n2"],
                                   method="agresti-caffo")
    close(t.pvalue, ref["p_tost_agresti_caffo"], CLOSED)
    lo, hi = stats.proportion_difference_ci(case["c1"], case["n1"], case["c2"], case["n2"],
                                            method="newcomb")
    close(lo, ref["ci90_newcomb"][0], CLOSED)
    close(hi, ref["ci90_newcomb"][1], CLOSED)


def test_tost_paired() -> None:
    ref = VECTORS["tost"]["paired"]
    t = stats.tost_paired(ref["b"], ref["c"], ref["n_pairs"])
    close(t.diff, ref["diff"], CLOSED)
    close(t.p_lower, ref["p_lower"], CLOSED)
    close(t.p_upper, ref["p_upper"], CLOSED)
    close(t.pvalue, ref["p_tost"], CLOSED)
    close(t.ci_lo, ref["ci90_lo"], CLOSED)
    close(t.ci_hi, ref["ci90_hi"], CLOSED)
    assert t.equivalent


def shapley_cells(dups: list[int], n: int = 40) -> pd.DataFrame:
    rows = [(c, m, mod) for c in ("c0", "c1", "c2") for m in ("m0", "m1") for mod in ("A", "B")]
    return pd.DataFrame([{"contract": c, "mode": m, "model": mod, "y": d, "n": n}
                         for (c, m, mod), d in zip(rows, dups, strict=True)])


SH_DUPS = [c[3] for c in VECTORS["shapley_no_separation"]["cells"]]


@pytest.mark.parametrize("name,dups", [
    ("shapley_no_separation", SH_DUPS),
    ("shapley_separation", [0 if i >= 8 else d for i, d in enumerate(SH_DUPS)]),
])
def test_shapley(name: str, dups: list[int]) -> None:
    ref = VECTORS[name]
    result = stats.shapley_r2(shapley_cells(dups), ref["factors"])
    close(result.total_r2, ref["total_r2"], CLOSED)
    for factor in ref["factors"]:
        close(result.phi[factor], ref["phi"][factor], CLOSED)
        close(result.share[factor], ref["share"][factor], CLOSED)
    for label, value in ref["r2_by_subset"].items():
        subset = () if label == "(none)" else tuple(label.split("+"))
        close(result.r2[subset], value, CLOSED)
    assert sum(result.phi.values()) == pytest.approx(result.total_r2, rel=1e-12)


def test_shapley_uses_the_bernoulli_likelihood() -> None:
    ref = VECTORS["pitfall_aggregated_glm_pseudo_r2"]
    result = stats.shapley_r2(shapley_cells(SH_DUPS), ["contract", "mode", "model"])
    close(result.total_r2, ref["right_bernoulli"], CLOSED)


def test_shapley_complete_separation_and_all_zero() -> None:
    ref = VECTORS["shapley_complete_separation"]
    cells = shapley_cells([40 if i < 4 else 0 for i in range(12)])
    result = stats.shapley_r2(cells, ["contract", "mode", "model"])
    close(result.total_r2, ref["total_r2"], CLOSED)
    for factor, share in ref["share"].items():
        assert result.share[factor] == pytest.approx(share, abs=1e-6)
    zero = stats.shapley_r2(shapley_cells([0] * 12), ["contract", "mode", "model"])
    assert math.isnan(zero.total_r2) and all(math.isnan(v) for v in zero.share.values())
    assert math.isnan(VECTORS["shapley_all_zero"]["total_r2"])


@pytest.mark.parametrize(("c1", "c2", "equivalent"), [(0, 0, True), (40, 40, True), (0, 40, False)])
def test_tost_with_every_episode_alike_is_exact_and_warns_nothing(c1, c2, equivalent) -> None:
    """Both arms at 0% or 100%: SE is 0, the difference is known exactly, and no division by
    zero reaches the user as a RuntimeWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = stats.tost_two_proportions(c1, 40, c2, 40)
    assert t.diff == (c1 - c2) / 40
    assert t.ci_lo == t.ci_hi == t.diff
    assert t.equivalent is equivalent


# -- clustering by world (stats.md §8): values computed two ways by support/clustered_routes.py --

CLUSTERED = VECTORS["clustered"]


def rows_of(sizes: list[int], hits: list[int]) -> tuple[list[int], list[int]]:
    """Row-level outcomes and world labels from per-world counts (hits first)."""
    y, g = [], []
    for world, (m, k) in enumerate(zip(sizes, hits, strict=True)):
        y += [1] * k + [0] * (m - k)
        g += [world] * m
    return y, g


@pytest.mark.parametrize(("data", "variant"), [("six", "unweighted"),
                                             ("six", "template_weights"),
                                             ("rare", "unweighted")])
def test_clustered_rate(data: str, variant: str) -> None:
    """The world-clustered interval, its ρ at the observed rate and the design effects, against
    the two independent routes of support/rate_routes.py."""
    from limbo.analysis.cluster import clustered_rate

    counts, ref = CLUSTERED["rate"][data]["data"], CLUSTERED["rate"][data][variant]
    y, g = rows_of(counts["sizes"], counts["successes"])
    templates = [counts["templates"][w] for w in g]
    weights = stats.equal_weights(templates) if variant == "template_weights" else None
    r = clustered_rate(y, g, weights)
    assert r.clusters == len(counts["sizes"]) and r.n == sum(counts["sizes"])
    assert r.successes == sum(counts["successes"]) and r.note == ""
    for key in ("icc", "deff_c", "deff_w", "rate", "n_eff", "lo", "hi"):
        close(getattr(r, key), ref[key], CLOSED)
    close(r.deff, ref["deff_w"] * ref["deff_c"], CLOSED)


def test_sign_flip_and_durkalski() -> None:
    from limbo.analysis.paired import clustered_mcnemar, durkalski, sign_flip

    ref = CLUSTERED["paired"]
    flip = sign_flip(ref["d"])
    assert flip.exact and flip.statistic == ref["statistic"] and flip.worlds == ref["worlds"]
    close(flip.pvalue, ref["p_sign_flip"], CLOSED)
    x2, p = durkalski(ref["d"])
    close(x2, ref["durkalski"], CLOSED)
    close(p, ref["p_durkalski"], CLOSED)
    a, b, g = [], [], []
    for world, (bk, ck) in enumerate(zip(ref["data"]["b"], ref["data"]["c"], strict=True)):
        a += [True] * bk + [False] * ck + [True]  # and one concordant pair per world
        b += [False] * bk + [True] * ck + [True]
        g += [world] * (bk + ck + 1)
    both = clustered_mcnemar(a, b, g)
    assert both.worlds == 10 and both.sign_flip == flip
    close(both.p_durkalski, ref["p_durkalski"], CLOSED)
    assert (both.mcnemar.b, both.mcnemar.c) == (sum(ref["data"]["b"]), sum(ref["data"]["c"]))


def test_clustered_tests_reduce_to_mcnemar_with_one_pair_per_world() -> None:
    from limbo.analysis.paired import durkalski, sign_flip

    ref = CLUSTERED["paired"]["one_discordant_pair_per_world"]
    d = [1] * ref["b"] + [-1] * ref["c"]
    close(sign_flip(d).pvalue, ref["p_sign_flip"], CLOSED)
    close(sign_flip(d).pvalue, VECTORS["mcnemar_exact"]["T1"]["pvalue"], CLOSED)
    x2, p = durkalski(d)
    close(x2, ref["durkalski"], CLOSED)
    close(p, ref["p_durkalski"], CLOSED)


def test_gee_bias_reduced_with_t_reference() -> None:
    from limbo.analysis.gee import gee_clustered

    ref = CLUSTERED["gee_bias_reduced_t"]
    y, x, g = gee_rows()
    result = gee_clustered(y, x, g)
    assert result.clusters == ref["clusters"] and result.df == ref["df"] and result.note == ""
    close(result.beta, ref["beta_x"], GEE)
    close(result.se, ref["se_bias_reduced"], GEE)
    close(result.pvalue, ref["p_t"], GEE)
    lo, hi = result.ci()
    close(lo, ref["OR_lo"], GEE)
    close(hi, ref["OR_hi"], GEE)


def test_paired_tost_clustered() -> None:
    from limbo.analysis.tost import tost_paired_clustered

    ref = CLUSTERED["tost_paired"]
    data = ref["data"]
    a, b, g = [], [], []
    for world, (m, bk, ck) in enumerate(zip(data["pairs"], data["b"], data["c"], strict=True)):
        a += [1] * bk + [0] * ck + [1] * (m - bk - ck)
        b += [0] * bk + [1] * ck + [1] * (m - bk - ck)
        g += [world] * m
    t = tost_paired_clustered(a, b, g, margin=data["margin"])
    assert t.clusters == ref["clusters"] and t.pairs == sum(data["pairs"])
    for got, key in ((t.diff, "diff"), (t.se, "se"), (t.p_lower, "p_lower"),
                     (t.p_upper, "p_upper"), (t.pvalue, "p_tost"), (t.ci_lo, "ci90_lo"),
                     (t.ci_hi, "ci90_hi")):
        close(got, ref[key], CLOSED)
    assert not t.equivalent and t.ci_hi > data["margin"]


def test_clustered_reference_values_are_reproduced_by_both_routes() -> None:
    """The fixture's clustered section is what the two independent routes give today."""
    from support.clustered_routes import section

    fresh = section()
    assert fresh == CLUSTERED
