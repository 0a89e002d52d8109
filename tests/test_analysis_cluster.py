"""Rates clustered by world (limbo.analysis.cluster): the interval covers what it says on
clustered data, reduces to today's interval under ``cluster="none"``, and says when the
intra-cluster correlation has no estimate."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from support.clustered_sim import beta_binomial, intervals

from limbo.analysis import stats
from limbo.analysis.cluster import (
    anova_icc,
    cluster_design_effect,
    cluster_ids,
    clustered_rate,
    wilson_interval,
)
from limbo.errors import UsageError

TRUE_RATE, ICC, WORLDS, EPISODES, REPLICATES = 0.3, 0.3, 30, 20, 2000


@pytest.fixture(scope="module")
def simulated() -> np.ndarray:
    """2,000 replicates of 30 worlds × 20 episodes at rate 0.3, ICC 0.3 (seeded)."""
    return beta_binomial(TRUE_RATE, ICC, REPLICATES, WORLDS, EPISODES)


def frame_of(hits: np.ndarray) -> pd.DataFrame:
    """One replicate as episode rows, each world a (template, instance) with instance numbers
    repeating across templates."""
    rows = [{"template": f"t{w % 3}", "instance": w // 3, "y": int(i < k)}
            for w, k in enumerate(hits) for i in range(EPISODES)]
    return pd.DataFrame(rows)


def test_the_generator_has_the_intended_clustering(simulated) -> None:
    """The spread of the replicate rates is the binomial one times 1 + (m − 1)·ICC, so the
    simulated data have the correlation the coverage test claims (independent of the
    estimator under test)."""
    rates = simulated.sum(axis=1) / (WORLDS * EPISODES)
    expected = TRUE_RATE * (1 - TRUE_RATE) / (WORLDS * EPISODES) * (1 + (EPISODES - 1) * ICC)
    assert rates.mean() == pytest.approx(TRUE_RATE, abs=0.005)
    assert rates.var(ddof=1) == pytest.approx(expected, rel=0.12)


def test_coverage_by_simulation(simulated) -> None:
    """Must-show 1: the world-clustered 95% interval covers the true rate in 93–97% of 2,000
    replicates; the interval without clustering (every episode independent) covers far less."""
    found = intervals(simulated, EPISODES)
    (lo, hi), (plain_lo, plain_hi) = found["world"], found["none"]
    for i in range(12):  # the vectorised path is what clustered_rate computes, row by row
        rows = frame_of(simulated[i])
        world = clustered_rate(rows["y"], cluster_ids(rows, "world"))
        none = clustered_rate(rows["y"], cluster_ids(rows, "none"))
        assert (world.lo, world.hi, world.clusters) == pytest.approx((lo[i], hi[i], WORLDS),
                                                                     rel=1e-12)
        assert (none.lo, none.hi) == pytest.approx((plain_lo[i], plain_hi[i]), rel=1e-12)
    covered = ((lo <= TRUE_RATE) & (TRUE_RATE <= hi)).mean()
    covered_plain = ((plain_lo <= TRUE_RATE) & (TRUE_RATE <= plain_hi)).mean()
    assert 0.93 <= covered <= 0.97, covered
    assert covered_plain < 0.80, covered_plain
    rho, undefined = anova_icc(simulated, np.full(simulated.shape, EPISODES))
    assert not undefined.any()
    assert np.mean(rho) == pytest.approx(ICC, abs=0.02)


def test_cluster_none_is_the_kish_interval() -> None:
    """``cluster="none"`` reproduces today's numbers: kish_rate, weighted or not."""
    y = [1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1]
    groups = list("aaabbbbccdddd")
    for weights in (None, stats.equal_weights(groups)):
        old, new = stats.kish_rate(y, weights), clustered_rate(y, None, weights)
        assert (new.rate, new.n_eff, new.lo, new.hi) == (old.rate, old.n_eff, old.lo, old.hi)
        assert new.deff_c == 1 and new.clusters == len(y) and math.isnan(new.icc)
        assert new.deff == pytest.approx(len(y) / old.n_eff, rel=1e-12)


@pytest.mark.parametrize("case", [
    (0, 10), (10, 10), (3, 10), (17, 50), (123, 1000), (1, 25930), (12.5, 40.3)])
def test_wilson_interval_is_stats_wilson(case: tuple[float, float]) -> None:
    lo, hi = wilson_interval(np.array([case[0]]), np.array([case[1]]))
    assert (float(lo[0]), float(hi[0])) == stats.wilson(*case)


def test_wilson_interval_of_nothing_is_nan() -> None:
    lo, hi = wilson_interval(np.array([0.0, 0.0]), np.array([0.0, 5.0]))
    assert math.isnan(lo[0]) and math.isnan(hi[0]) and lo[1] == 0.0


def test_icc_by_hand_on_unequal_clusters() -> None:
    """Worlds [1,0,0] [1,1,1] [0,0,0] [0,1,0] [1,1]: MSB, MSW and m₀ by hand."""
    sizes, hits = np.array([3, 3, 3, 3, 2]), np.array([1, 3, 0, 1, 2])
    n, p = 14, 7 / 14
    msb = sum(m * (k / m - p) ** 2 for m, k in zip(sizes, hits, strict=True)) / 4
    msw = sum(k * (1 - k / m) for m, k in zip(sizes, hits, strict=True)) / (n - 5)
    m0 = (n - (sizes ** 2).sum() / n) / 4
    rho, undefined = anova_icc(hits, sizes)
    assert float(rho) == pytest.approx((msb - msw) / (msb + (m0 - 1) * msw), rel=1e-12)
    assert not undefined
    deff = cluster_design_effect(rho, sizes)
    assert float(deff) == pytest.approx(1 + ((sizes ** 2).sum() / n - 1) * float(rho), rel=1e-12)


def test_icc_is_clipped_at_zero_when_worlds_differ_less_than_chance() -> None:
    rho, undefined = anova_icc(np.array([5, 5, 5, 5]), np.array([10, 10, 10, 10]))
    assert float(rho) == 0.0 and not undefined


@pytest.mark.parametrize(("y", "worlds", "deff_c", "says"), [
    ([0] * 6, list("aabbcc"), 2.0, "undefined"),            # a cell at 0%: deff_c = m̃
    ([1] * 6, list("aabbcc"), 2.0, "undefined"),            # and at 100%
    ([0, 1, 1], list("aaa"), 3.0, "one cluster"),           # K = 1: no estimate, said so
    ([0, 1, 1], list("abc"), 1.0, "one episode per cluster"),
])
def test_no_icc_estimate_is_flagged(y, worlds, deff_c, says) -> None:
    r = clustered_rate(y, worlds)
    assert r.icc == 1.0 and r.deff_c == deff_c and says in r.note
    assert r.n_eff == pytest.approx(len(y) / deff_c)


def test_empty_cell_is_nan() -> None:
    r = clustered_rate([], [])
    assert r.n == 0 and r.clusters == 0 and math.isnan(r.rate) and math.isnan(r.lo)


def test_labels_do_not_matter_only_membership() -> None:
    y = [1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    a = clustered_rate(y, list("aaabbbcccddd"))
    b = clustered_rate(y, [9, 9, 9, 2, 2, 2, "x", "x", "x", 0, 0, 0])
    c = clustered_rate(y[::-1], list("dddcccbbbaaa"))
    for other in (b, c):
        assert (a.lo, a.hi, a.icc, a.clusters) == pytest.approx(
            (other.lo, other.hi, other.icc, other.clusters), rel=1e-12)


def test_world_is_template_and_instance() -> None:
    """Instance numbers repeat across templates: a world is the pair, never the number."""
    frame = pd.DataFrame({"template": ["t1", "t1", "t2", "t2"], "instance": [0, 1, 0, 1]})
    assert len(set(cluster_ids(frame, "world"))) == 4
    assert len(set(cluster_ids(frame, "template"))) == 2
    assert cluster_ids(frame, "none") is None
    with pytest.raises(UsageError, match="world, template, none"):
        cluster_ids(frame, "instance")


def test_weights_and_clusters_multiply() -> None:
    y = [1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1]
    worlds = list("aaabbbcccdddee")
    weights = stats.equal_weights(["t1"] * 6 + ["t2"] * 8)
    both = clustered_rate(y, worlds, weights)
    kish = stats.kish_rate(y, weights)
    alone = clustered_rate(y, worlds)
    assert both.deff_w == pytest.approx(len(y) / kish.n_eff, rel=1e-12)
    assert both.deff_c == alone.deff_c and both.rate == kish.rate
    assert both.n_eff == pytest.approx(len(y) / (both.deff_w * both.deff_c), rel=1e-12)
    assert both.hi - both.lo > kish.hi - kish.lo


def test_rows_without_a_world_or_of_another_length_are_refused() -> None:
    with pytest.raises(ValueError, match="1 row"):
        clustered_rate([1, 0, 1], ["a", None, "b"])
    with pytest.raises(ValueError, match="2 cluster labels for 3 rows"):
        clustered_rate([1, 0, 1], ["a", "b"])
