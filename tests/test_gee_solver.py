"""The numpy logit GEE gives statsmodels' estimates, α and all three covariances on data sets it
was not written against: random clustered binary data with unequal cluster sizes, a correlated
outcome, a covariate that varies within and between clusters, and rows in no particular order."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from statsmodels.genmod import cov_struct as structures
from statsmodels.genmod.families import Binomial
from statsmodels.genmod.generalized_estimating_equations import GEE

from limbo.analysis import gee_solver

RTOL = 1e-10


def _data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    clusters = int(rng.integers(5, 40))
    sizes = rng.integers(1, 60, clusters)
    codes = np.repeat(np.arange(clusters), sizes)
    effect = rng.normal(0, 1.2, clusters)[codes]
    x = (rng.random(len(codes)) < rng.uniform(0.2, 0.8, clusters)[codes]).astype(float)
    y = (rng.random(len(codes)) < 1 / (1 + np.exp(-(-0.5 + 0.9 * x + effect)))).astype(float)
    shuffle = rng.permutation(len(codes))
    return y[shuffle], x[shuffle], codes[shuffle]


def _statsmodels(y, x, codes, exchangeable, cov_type):
    order = np.argsort(codes, kind="stable")
    structure = structures.Exchangeable() if exchangeable else structures.Independence()
    model = GEE(y[order], np.column_stack([np.ones(len(x)), x[order]]), groups=codes[order],
                family=Binomial(), cov_struct=structure)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = model.fit(maxiter=500, ctol=1e-10, cov_type=cov_type)
    return res.params, res.bse, float(np.asarray(structure.dep_params)) if exchangeable else 0.0


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("exchangeable", [True, False])
@pytest.mark.parametrize("cov_type", gee_solver.COV_TYPES)
def test_the_solver_gives_statsmodels_numbers(seed, exchangeable, cov_type) -> None:
    y, x, codes = _data(seed)
    ours = gee_solver.fit(y, np.column_stack([np.ones(len(x)), x]), codes, exchangeable,
                          cov_type)
    params, bse, alpha = _statsmodels(y, x, codes, exchangeable, cov_type)
    np.testing.assert_allclose(ours.params, params, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(ours.bse, bse, rtol=RTOL)
    assert ours.alpha == pytest.approx(alpha, rel=RTOL, abs=1e-12)


def test_a_cluster_of_thousands_costs_p_by_p_solves() -> None:
    """Two clusters of 5,000 episodes: the bias-reduced covariance still matches (an n × n
    solve per cluster would take 10⁸ cells of memory here)."""
    rng = np.random.default_rng(7)
    codes = np.repeat(np.arange(6), [5000, 5000, 40, 30, 20, 10])
    x = (rng.random(len(codes)) < 0.5).astype(float)
    y = (rng.random(len(codes)) < 0.3 + 0.2 * x).astype(float)
    ours = gee_solver.fit(y, np.column_stack([np.ones(len(x)), x]), codes, True, "bias_reduced")
    assert np.all(np.isfinite(ours.bse)) and ours.bse[1] > 0


def test_an_unknown_covariance_is_refused() -> None:
    y, x, codes = _data(0)
    with pytest.raises(ValueError, match="cov_type"):
        gee_solver.fit(y, np.column_stack([np.ones(len(x)), x]), codes, True, "sandwich")


def _diverging() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """149 episodes in 11 worlds, neither arm separated (31.5% positive): the exchangeable α
    iterates below −1/(n − 1) for the largest world, and the fit runs off to fitted
    probabilities of 0 and 1 (statsmodels returns an odds ratio of e^(2.9·10¹¹⁹), SE 0)."""
    rng = np.random.default_rng(7)
    for _ in range(55):  # the 55th random data set of this generator is the one met
        k = int(rng.integers(6, 40))
        codes = np.repeat(np.arange(k), rng.integers(1, 30, k))
        x = rng.integers(0, 2, len(codes)).astype(float)
        y = (rng.random(len(codes)) < 0.2 + 0.3 * x).astype(float)
    return y, x, codes


@pytest.mark.parametrize("cov_type", gee_solver.COV_TYPES)
def test_a_degenerate_fit_says_so_instead_of_printing_numbers(cov_type) -> None:
    y, x, codes = _diverging()
    assert len(y) == 149 and 0 < y[x == 0].mean() < 1 and 0 < y[x == 1].mean() < 1
    design = np.column_stack([np.ones(len(x)), x])
    ours = gee_solver.fit(y, design, codes, True, cov_type)
    assert ours.problem.startswith("degenerated") and np.all(np.isnan(ours.bse))
    params, bse, _ = _statsmodels(y, x, codes, True, cov_type)
    assert abs(params[1]) > 1e6  # what the refusal replaces
    alone = gee_solver.fit(y, design, codes, False, cov_type)  # independence: a sound fit
    assert alone.problem == "" and np.all(np.isfinite(alone.bse))


def test_the_odds_ratios_carry_the_refusal_as_their_note() -> None:
    from limbo.analysis.gee import gee_clustered, gee_odds_ratio

    y, x, codes = _diverging()
    for found in (gee_clustered(y, x, codes), gee_odds_ratio(y, x, codes)):
        assert np.isnan(found.beta) and np.isnan(found.pvalue)
        assert found.note.startswith("the GEE degenerated") and found.clusters == 11
