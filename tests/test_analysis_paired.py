"""Tests that treat the world as the unit (limbo.analysis.paired, tost, gee), each against an
independent computation: brute-force enumeration of sign flips, Durkalski's statistic and the
clustered TOST by hand, statsmodels' paired t-TOST, and a GEE with its Mancl–DeRouen covariance
written out in numpy (support/clustered_routes.py)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student
from support.clustered_routes import flip_convolved, gee_by_hand
from support.handcount import mcnemar as mcnemar_by_hand

from limbo.analysis.gee import MIN_CLUSTERS, gee_clustered
from limbo.analysis.paired import (
    EXACT_WORLDS,
    MC_REPLICATES,
    clustered_mcnemar,
    durkalski,
    holm_each,
    sign_flip,
    world_discordance,
)
from limbo.analysis.stats import holm
from limbo.analysis.tost import tost_clustered_arms, tost_paired_clustered

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "stats_vectors.json").read_text())


def brute_force(d: list[int]) -> float:
    """Every one of the 2^G sign assignments of the nonzero d_k, counted in plain Python."""
    d = [v for v in d if v]
    t = abs(sum(d))
    flips = list(itertools.product((1, -1), repeat=len(d)))
    return sum(abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= t
               for signs in flips) / len(flips)


@pytest.mark.parametrize("d", [
    [3, 1, -1, 2, 0, 4, 1], [1, -1], [2, -2, 0, 0], [-5, -1, -2, 3], [7], [], [0, 0],
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -13, -1], [4, -2, 3, 0, 4, 0, 2, 2, 0, 1]])
def test_sign_flip_is_the_brute_force_enumeration(d: list[int]) -> None:
    result = sign_flip(d)
    assert result.exact and result.worlds == sum(v != 0 for v in d)
    assert result.statistic == abs(sum(d))
    assert result.pvalue == pytest.approx(brute_force(d), rel=1e-12)


def halves(d: list[int]) -> float:
    """The exact sign-flip p by meeting in the middle: every sum of each half's signs (2^12 and
    2^13 of them for 25 worlds), then the pairs of sums whose total reaches |Σ d| counted by
    sorting — an independent route for sums too large to convolve."""
    t = abs(sum(d))
    left, right = d[:len(d) // 2], d[len(d) // 2:]

    def sums(part: list[int]) -> np.ndarray:
        signs = np.array(list(itertools.product((1, -1), repeat=len(part))), dtype=np.int64)
        return signs @ np.array(part, dtype=np.int64)

    a, b = sums(left), np.sort(sums(right))
    hits = sum(len(b) - np.searchsorted(b, t - x) + np.searchsorted(b, -t - x, side="right")
               for x in a.tolist())
    return hits / 2 ** len(d)


@pytest.mark.parametrize("worlds", [21, 30, 200])
def test_sign_flip_is_exact_beyond_twenty_worlds(worlds: int) -> None:
    """Unequal |d_k| in 21, 30 and 200 worlds: the exact distribution, convolved world by world
    (support/clustered_routes.py's exact fractions) — no Monte Carlo, no floor."""
    rng = np.random.default_rng(worlds)
    d = [int(v) for v in rng.choice([-4, -3, -2, -1, 1, 2, 3, 5], size=worlds)]
    result = sign_flip(d)
    assert result.exact and not result.bound and result.worlds == worlds
    assert result.pvalue == pytest.approx(flip_convolved(d), rel=1e-12)


def test_thirty_worlds_all_one_way_is_two_in_two_to_the_thirty() -> None:
    """Must-show 4's shape: 30 worlds, every discordant pair the same way, |d_k| 2 or 3 — only
    the two all-alike flips reach |Σ d|: p = 2/2^30 = 1.86e-09, where 100,000 Monte Carlo flips
    could only say p ≤ 1e-05."""
    d = [2] * 15 + [3] * 15
    result = sign_flip(d)
    assert result.exact and result.pvalue == 2 / 2 ** 30


def test_monte_carlo_beyond_the_exact_budget_and_its_floor_is_a_bound() -> None:
    """25 worlds with |d_k| near a million: G·Σ|d| is past the exact budget, so 100,000 seeded
    Monte Carlo flips — within 4.5 Monte Carlo SE of the exact p (meeting in the middle), the
    same for the same seed. All one way, nothing is as extreme: p is the floor 1/(B + 1) and is
    flagged as a bound."""
    rng = np.random.default_rng(7)
    d = [int(v) * int(s) for v, s in zip(rng.integers(500_000, 1_500_000, 25),
                                          rng.choice([-1, 1], 25), strict=True)]
    result = sign_flip(d, seed=11)
    exact = halves(d)
    se = math.sqrt(exact * (1 - exact) / MC_REPLICATES)
    assert not result.exact and not result.bound and abs(result.pvalue - exact) < 4.5 * se
    assert round(result.pvalue * (MC_REPLICATES + 1)) == pytest.approx(
        result.pvalue * (MC_REPLICATES + 1), abs=1e-6)  # a count over B + 1
    assert sign_flip(d, seed=11) == result and sign_flip(d, seed=12).pvalue != result.pvalue
    floor = sign_flip([abs(v) for v in d])
    assert not floor.exact and floor.bound and floor.pvalue == 1 / (MC_REPLICATES + 1)
    assert halves([abs(v) for v in d]) == 2 / 2 ** 25


def test_past_a_thousand_worlds_is_monte_carlo() -> None:
    d = [1, 2] * (EXACT_WORLDS // 2) + [1]
    assert not sign_flip(d).exact and sign_flip(d[:EXACT_WORLDS]).exact


@pytest.mark.parametrize("d", [[1] * 40, [-2] * 25 + [2] * 5, [3, -3] * 15 + [3],
                               [1] * 3 + [-1] * 30])
def test_equal_worlds_beyond_twenty_are_exact(d: list[int]) -> None:
    """Every |d_k| alike (one pair per cluster, as under --cluster none): the flips' sum is a
    binomial, so p is exact for any number of worlds — the exact McNemar p of the worlds'
    signs, which the convolution of the exact distribution confirms."""
    result = sign_flip(d)
    ups, downs = sum(v > 0 for v in d), sum(v < 0 for v in d)
    assert result.exact and result.worlds == len(d)
    assert result.pvalue == pytest.approx(mcnemar_by_hand(ups, downs), rel=1e-12)
    assert result.pvalue == pytest.approx(flip_convolved(d), rel=1e-9)


@pytest.mark.parametrize("name", sorted(VECTORS["mcnemar_exact"]))
def test_one_discordant_pair_per_world_is_mcnemar(name: str) -> None:
    """§8's reduction: the sign-flip p is the exact McNemar p (for any number of worlds),
    Durkalski's X² the uncorrected χ² (b − c)² / (b + c)."""
    case = VECTORS["mcnemar_exact"][name]
    b, c = case["b"], case["c"]
    a_side = [True] * b + [False] * c + [True, False]  # and two concordant pairs
    b_side = [False] * b + [True] * c + [True, False]
    result = clustered_mcnemar(a_side, b_side, range(b + c + 2))
    assert result.mcnemar.pvalue == pytest.approx(case["pvalue"], rel=1e-6)
    assert result.mcnemar.pvalue == pytest.approx(mcnemar_by_hand(b, c), rel=1e-12)
    assert result.sign_flip.exact
    assert result.sign_flip.pvalue == pytest.approx(case["pvalue"], rel=1e-6)
    assert result.durkalski == (0.0 if b + c == 0 else pytest.approx((b - c) ** 2 / (b + c)))


def test_durkalski_by_hand() -> None:
    b, c = [4, 0, 3, 1, 5], [0, 2, 0, 1, 1]
    d = [bk - ck for bk, ck in zip(b, c, strict=True)]  # 4, -2, 3, 0, 4: Σ = 9, Σd² = 45
    x2, p = durkalski(d)
    assert x2 == pytest.approx(81 / 45, rel=1e-15)
    assert p == pytest.approx(math.erfc(math.sqrt(x2 / 2)), rel=1e-12)
    assert durkalski([0, 0]) == (0.0, 1.0)


def test_discordance_by_world() -> None:
    a = [1, 1, 0, 1, 0, 0, 1, 1]
    b = [0, 0, 1, 1, 1, 0, 0, 1]
    bk, ck = world_discordance(a, b, ["w1", "w1", "w1", "w2", "w2", "w3", "w3", "w3"])
    assert bk.tolist() == [2, 0, 1] and ck.tolist() == [1, 1, 0]


def test_twelve_pairs_from_three_worlds_are_not_twelve_coin_flips() -> None:
    """The docs' compare example: 12 discordant pairs, all one way. As 12 worlds: p = 2/2^12
    either way. From 3 worlds of 4: the clustered p is 2/2^3, McNemar still 4.9e-4."""
    a, b = [False] * 12, [True] * 12
    spread = clustered_mcnemar(a, b, range(12))
    lumped = clustered_mcnemar(a, b, [k // 4 for k in range(12)])
    assert spread.sign_flip.pvalue == spread.mcnemar.pvalue == 2 / 2 ** 12
    assert lumped.mcnemar.pvalue == 2 / 2 ** 12 and lumped.sign_flip.pvalue == 0.25
    assert lumped.worlds == 3 and lumped.sign_flip.worlds == 3


def test_holm_is_applied_to_each_kind_of_p_separately() -> None:
    tests = [clustered_mcnemar([True] * 9, [False] * 9, [k // 3 for k in range(9)]),
             clustered_mcnemar([True] * 6 + [False], [False] * 7, range(7)), None]
    flips, plain, bounds = holm_each(tests)
    np.testing.assert_allclose(flips[:2], holm([t.sign_flip.pvalue for t in tests[:2]]))
    np.testing.assert_allclose(plain[:2], holm([t.mcnemar.pvalue for t in tests[:2]]))
    assert math.isnan(flips[2]) and math.isnan(plain[2]) and not bounds.any()


def test_a_holm_p_is_a_bound_where_a_monte_carlo_floor_sets_it() -> None:
    """Three comparisons: one whose sign-flip p is a Monte Carlo floor (a bound), two exact.
    Holm's step-down maximum for the smallest is the floor times 3: still a bound; where an
    exact p sets the maximum, the adjusted p is exact."""
    big = [1, 2] * (EXACT_WORLDS // 2 + 1)  # past a thousand worlds, all one way
    tests = [clustered_mcnemar([True] * sum(big), [False] * sum(big),
                               [k for k, v in enumerate(big) for _ in range(v)]),
             clustered_mcnemar([True] * 6 + [False], [False] * 7, range(7)),
             clustered_mcnemar([True] * 3 + [False] * 2, [False] * 3 + [True] * 2, range(5))]
    flips, _, bounds = holm_each(tests)
    assert tests[0].sign_flip.bound
    assert flips[0] == 3 / (MC_REPLICATES + 1) and bounds.tolist() == [True, False, False]


def test_clustered_tost_by_hand() -> None:
    """Three worlds: D = (2, −1, 0) over m = (4, 3, 5) pairs, so Δ = 1/12 and
    SE = √(3/2 · Σ(D_k − Δ·m_k)²) / 12, on t(2)."""
    a = [1, 1, 0, 0] + [0, 1, 1] + [1] * 5
    b = [0, 0, 0, 0] + [1, 1, 1] + [1] * 5
    t = tost_paired_clustered(a, b, [0] * 4 + [1] * 3 + [2] * 5, margin=0.1)
    delta = 1 / 12
    se = math.sqrt(1.5 * sum((dk - delta * mk) ** 2 for dk, mk in ((2, 4), (-1, 3), (0, 5)))) / 12
    assert (t.diff, t.se, t.clusters, t.pairs) == pytest.approx((delta, se, 3, 12), rel=1e-12)
    assert t.p_lower == pytest.approx(float(student.sf((delta + 0.1) / se, 2)), rel=1e-12)
    assert t.p_upper == pytest.approx(float(student.cdf((delta - 0.1) / se, 2)), rel=1e-12)
    q = float(student.ppf(0.95, 2))
    assert (t.ci_lo, t.ci_hi) == pytest.approx((delta - q * se, delta + q * se), rel=1e-12)


def test_clustered_tost_with_one_pair_per_world_is_the_paired_t_tost() -> None:
    from statsmodels.stats.weightstats import ttost_paired

    rng = np.random.default_rng(2)
    a, b = rng.random(80) < 0.3, rng.random(80) < 0.32
    ours = tost_paired_clustered(a, b, range(80))
    p, lower, upper = ttost_paired(a.astype(float), b.astype(float), -0.05, 0.05)
    assert ours.pvalue == pytest.approx(p, rel=1e-10)
    assert (ours.p_lower, ours.p_upper) == pytest.approx((lower[1], upper[1]), rel=1e-10)


def test_clustered_tost_needs_two_worlds_and_is_exact_without_spread() -> None:
    one = tost_paired_clustered([1, 0], [0, 0], ["w", "w"])
    assert math.isnan(one.diff) and one.clusters == 1
    alike = tost_paired_clustered([1, 1, 0, 0], [1, 1, 0, 0], ["a", "a", "b", "b"])
    assert alike.diff == 0 and alike.se == 0 and alike.equivalent
    assert alike.ci_lo == alike.ci_hi == 0


def test_tost_of_two_arms_sharing_worlds_by_hand() -> None:
    """H4's design: arms that share worlds without one-to-one pairs, weighted within each arm.
    Three worlds; the scores u_k and the SE written out in plain Python, then t(2)."""
    #           world a                 world b          world c
    y = [1, 0, 1, 0, 1] + [0, 0, 1, 1] + [1, 0, 0]
    arm = [1, 1, 0, 0, 0] + [1, 0, 0, 0] + [1, 1, 0]
    w = [0.5, 0.5, 1, 1, 1] + [2, 1, 1, 1] + [1, 1, 0.5]
    world = list("aaaaa") + list("bbbb") + list("ccc")
    t = tost_clustered_arms(np.array(y, float), np.array(arm, bool), world, np.array(w))
    a = [(yi, wi, k) for yi, ai, wi, k in zip(y, arm, w, world, strict=True) if ai]
    b = [(yi, wi, k) for yi, ai, wi, k in zip(y, arm, w, world, strict=True) if not ai]
    wa, wb = sum(wi for _, wi, _ in a), sum(wi for _, wi, _ in b)
    pa, pb = sum(yi * wi for yi, wi, _ in a) / wa, sum(yi * wi for yi, wi, _ in b) / wb
    u = {k: sum(wi * (yi - pa) for yi, wi, kk in a if kk == k) / wa
         - sum(wi * (yi - pb) for yi, wi, kk in b if kk == k) / wb for k in "abc"}
    se = math.sqrt(3 / 2 * sum(v * v for v in u.values()))
    assert (t.diff, t.se, t.clusters, t.pairs) == pytest.approx((pa - pb, se, 3, 12), rel=1e-12)
    q = float(student.ppf(0.95, 2))
    assert (t.ci_lo, t.ci_hi) == pytest.approx((pa - pb - q * se, pa - pb + q * se), rel=1e-12)
    assert t.p_lower == pytest.approx(float(student.sf((pa - pb + 0.05) / se, 2)), rel=1e-12)


def test_tost_of_two_arms_reduces_to_the_paired_and_the_independent_cases() -> None:
    """Pairs stacked as two arms give the paired clustered TOST exactly; every episode its own
    cluster gives the Wald SE of two independent proportions times √(K/(K − 1))."""
    rng = np.random.default_rng(5)
    a, b = rng.random(60) < 0.4, rng.random(60) < 0.5
    worlds = rng.integers(0, 9, 60)
    paired = tost_paired_clustered(a, b, worlds)
    stacked = tost_clustered_arms(np.r_[a, b].astype(float), np.r_[[True] * 60, [False] * 60],
                                  np.r_[worlds, worlds])
    assert (stacked.diff, stacked.se, stacked.clusters) == pytest.approx(
        (paired.diff, paired.se, paired.clusters), rel=1e-12)
    assert (stacked.ci_lo, stacked.pvalue) == pytest.approx((paired.ci_lo, paired.pvalue),
                                                            rel=1e-12)
    own = tost_clustered_arms(np.r_[a, b].astype(float), np.r_[[True] * 60, [False] * 60],
                              range(120))
    pa, pb = a.mean(), b.mean()
    wald = math.sqrt(pa * (1 - pa) / 60 + pb * (1 - pb) / 60)
    assert own.se == pytest.approx(wald * math.sqrt(120 / 119), rel=1e-12)
    assert math.isnan(tost_clustered_arms([1.0, 0.0], [True, True], ["a", "b"]).diff)


def gee_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from support.clustered_routes import gee_rows

    return gee_rows()


def test_gee_bias_reduced_against_mancl_derouen_by_hand() -> None:
    """A second data set (the reference one with worlds 0–5 only and x flipped in two worlds)
    through both: statsmodels' bias-reduced covariance and the formula in numpy, then t(G − 2)
    by hand."""
    y, x, g = gee_data()
    keep = g < 6
    y, x, g = y[keep], np.where(np.isin(g[keep], [1, 4]), 1 - x[keep], x[keep]), g[keep]
    beta, se = gee_by_hand(y, x, g)
    ours = gee_clustered(y, x, g)
    assert ours.clusters == 6 and ours.df == 4
    assert (ours.beta, ours.se) == pytest.approx((beta, se), rel=1e-6)
    assert ours.pvalue == pytest.approx(2 * float(student.sf(abs(beta / se), 4)), rel=1e-6)
    lo, hi = ours.ci()
    q = float(student.ppf(0.975, 4))
    assert (lo, hi) == pytest.approx((math.exp(beta - q * se), math.exp(beta + q * se)),
                                     rel=1e-6)


def test_gee_refuses_fewer_than_five_clusters_and_says_why() -> None:
    y, x, g = gee_data()
    few = gee_clustered(y, x, g % 4)
    assert math.isnan(few.beta) and math.isnan(few.pvalue) and few.clusters == 4
    assert few.note == f"G=4 cluster(s): a clustered GEE needs at least {MIN_CLUSTERS}"
    assert not math.isnan(gee_clustered(y, x, g % 5).beta)
    separated = gee_clustered(np.where(x == 0, 0.0, y), x, g)
    assert math.isnan(separated.beta) and "separation" in separated.note


def exact_by_convolution(d: np.ndarray) -> float:
    """P(|Σ s_k d_k| ≥ |Σ d_k|) from the exact distribution, convolved in floating point."""
    d = d[d != 0]
    offset = int(np.abs(d).sum())
    dist = np.zeros(2 * offset + 1)
    dist[offset] = 1.0
    for v in np.abs(d):
        dist = (np.roll(dist, v) + np.roll(dist, -v)) / 2
    values = np.arange(-offset, offset + 1)
    return float(dist[np.abs(values) >= abs(int(d.sum()))].sum())


def test_sign_flip_with_many_worlds_stays_right() -> None:
    """About 500 discordant worlds: exact; about 1,300: Monte Carlo flips drawn in blocks
    (memory stays bounded), within Monte Carlo error of the exact p."""
    d = np.random.default_rng(4).integers(-2, 3, 600)  # symmetric: p far from 0 and 1
    result = sign_flip(d, seed=5)
    assert result.worlds == int((d != 0).sum()) > 400 and result.exact
    assert result.pvalue == pytest.approx(exact_by_convolution(d), rel=1e-9)
    d = np.random.default_rng(4).integers(-2, 3, 1600)
    result, exact = sign_flip(d, seed=5), exact_by_convolution(d)
    assert result.worlds > EXACT_WORLDS and not result.exact and not result.bound
    assert abs(result.pvalue - exact) < 4.5 * math.sqrt(exact * (1 - exact) / MC_REPLICATES)
    assert 0.01 < exact < 0.99


def test_pairs_without_a_world_are_refused() -> None:
    with pytest.raises(ValueError, match="1 row"):
        clustered_mcnemar([True, False], [False, False], ["w", None])
    with pytest.raises(ValueError, match="1 cluster labels for 2 rows"):
        tost_paired_clustered([1, 0], [0, 0], ["w"])


def test_the_order_pairs_were_loaded_in_does_not_move_the_monte_carlo_p() -> None:
    rng = np.random.default_rng(6)
    worlds = np.repeat([f"t{k}#0" for k in range(2400)], 4)
    a, b = rng.random(9600) < 0.5, rng.random(9600) < 0.4
    order = rng.permutation(9600)
    first = clustered_mcnemar(a, b, worlds)
    shuffled = clustered_mcnemar(a[order], b[order], worlds[order])
    assert not first.sign_flip.exact and shuffled.sign_flip == first.sign_flip
