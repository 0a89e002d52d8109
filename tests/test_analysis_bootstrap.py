"""The cluster bootstrap (limbo.analysis.bootstrap): worlds are what it resamples, the same seed
gives the same interval, the vectorised and the generic paths agree, and it gives intervals to
statistics that have no formula (Shapley shares)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from limbo.analysis import bootstrap as bs
from limbo.analysis import stats
from limbo.analysis.cluster import clustered_rate


def clustered(seed: int, worlds: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Episodes of ``worlds`` worlds of 5–29 episodes each, world rates Beta with mean 0.3 and
    intra-world correlation 0.3."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 30, worlds)
    world_rate = rng.beta(0.3 * 0.7 / 0.3, 0.7 * 0.7 / 0.3, worlds)
    g = np.repeat(np.arange(worlds), sizes)
    return (rng.random(len(g)) < world_rate[g]).astype(float), g


def rate_interval(y: np.ndarray, g: np.ndarray, **kwargs) -> bs.Interval:
    return bs.bootstrap_rate(y, g, **kwargs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_design_effect_interval_is_as_wide_as_the_cluster_bootstrap(seed: int) -> None:
    """The Wilson interval on n / deff is at least as wide as a 2,000-replicate cluster
    bootstrap of the same rate, and within 15% of it (unequal worlds, ICC 0.3)."""
    y, g = clustered(seed)
    rate = clustered_rate(y, g)
    boot = rate_interval(y, g, replicates=2000, seed=seed)
    ratio = (rate.hi - rate.lo) / float(boot.hi - boot.lo)
    assert 1.0 <= ratio <= 1.15, ratio
    assert float(boot.estimate) == rate.rate and boot.clusters == 40 and boot.undefined == 0


def test_resampling_episodes_instead_of_worlds_is_overconfident() -> None:
    """Treating each episode as its own cluster gives a far narrower interval: why the world
    is the unit."""
    y, g = clustered(3)
    worlds = rate_interval(y, g, replicates=1000)
    episodes = rate_interval(y, np.arange(len(y)), replicates=1000)
    assert float(episodes.hi - episodes.lo) < 0.6 * float(worlds.hi - worlds.lo)


def test_seeded() -> None:
    y, g = clustered(4)
    first, again = rate_interval(y, g, seed=7), rate_interval(y, g, seed=7)
    other = rate_interval(y, g, seed=8)
    assert (float(first.lo), float(first.hi)) == (float(again.lo), float(again.hi))
    assert (float(first.lo), float(first.hi)) != (float(other.lo), float(other.hi))
    assert first.seed == 7 and first.replicates == 1000


def test_draws_resample_clusters_with_replacement() -> None:
    draws = np.vstack(list(bs.multiplicities(12, 600, seed=1)))
    assert draws.shape == (600, 12) and (draws.sum(axis=1) == 12).all()
    assert (draws == 0).any() and (draws >= 2).any()  # some worlds left out, some repeated
    fewer = np.vstack(list(bs.multiplicities(12, 300, seed=1)))
    np.testing.assert_array_equal(fewer, draws[:300])  # blocks do not change the stream


def test_progress_is_reported_per_block() -> None:
    seen: list[tuple[int, int]] = []
    y, g = clustered(5)
    rate_interval(y, g, replicates=600, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(250, 600), (500, 600), (600, 600)]


def test_generic_and_vectorised_paths_agree() -> None:
    """A weighted rate through row multiplicities equals the same rate from per-world sums:
    the generic path sees a world drawn twice as its rows counted twice."""
    y, g = clustered(6)
    weights = stats.equal_weights(g % 3)
    frame = pd.DataFrame({"y": y, "world": g, "w": weights})

    def weighted_rate(rows: pd.DataFrame, copies: np.ndarray) -> float:
        w = rows["w"].to_numpy() * copies
        return float((w * rows["y"].to_numpy()).sum() / w.sum())

    generic = bs.cluster_bootstrap(frame, "world", weighted_rate, replicates=300, seed=2)
    fast = bs.bootstrap_sums(bs.mean_sums(y, g, weights), bs.ratio, replicates=300, seed=2)
    assert float(generic.estimate) == pytest.approx(float(fast.estimate), rel=1e-12)
    assert (float(generic.lo), float(generic.hi)) == pytest.approx(
        (float(fast.lo), float(fast.hi)), rel=1e-12)


def test_replicates_without_a_value_are_counted_not_hidden() -> None:
    frame = pd.DataFrame({"world": ["a", "a", "b", "c", "d"], "y": [1.0, 0.0, 1.0, 0.0, 1.0]})

    def rate_of_a(rows: pd.DataFrame, copies: np.ndarray) -> float:
        in_a = (rows["world"] == "a").to_numpy() * copies
        return float((in_a * rows["y"]).sum() / in_a.sum()) if in_a.sum() else math.nan

    iv = bs.cluster_bootstrap(frame, "world", rate_of_a, replicates=400, seed=3)
    # P(world a not drawn in 4 draws) = (3/4)^4 ≈ 0.32
    assert 80 < iv.undefined < 180 and float(iv.lo) == float(iv.hi) == 0.5


def test_no_clusters_is_refused() -> None:
    with pytest.raises(ValueError, match="no clusters"):
        bs.bootstrap_sums(np.empty((0, 2)), bs.ratio)
    with pytest.raises(ValueError, match="no clusters"):
        bs.cluster_bootstrap(pd.DataFrame({"w": []}), "w", lambda f, c: 0.0)


def shapley_rows(seed: int = 9) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = pd.DataFrame({"world": np.repeat(np.arange(24), 30),
                         "contract": rng.choice(["c0", "c1", "c2"], 720),
                         "model": rng.choice(["A", "B"], 720)})
    base = np.where(rows["contract"] == "c0", 0.5, np.where(rows["contract"] == "c1", 0.2, 0.05))
    rows["dup"] = (rng.random(720) < base + 0.05 * (rows["model"] == "B")).astype(float)
    return rows


def shapley_of_rows(rows: pd.DataFrame) -> stats.Shapley:
    cells = rows.groupby(FACTORS, as_index=False)["dup"].agg(y="sum", n="count")
    return stats.shapley_r2(cells, FACTORS)


FACTORS = ["contract", "model"]


def test_shapley_statistic_is_the_decomposition_of_the_resampled_rows() -> None:
    """Re-counting cells with multiplicities is the decomposition of the rows copied that
    many times; with every world once it is the decomposition of the data."""
    rows = shapley_rows()
    statistic = bs.shapley_statistic(rows, FACTORS, "dup")
    plain = shapley_of_rows(rows)
    np.testing.assert_allclose(statistic(rows, np.ones(len(rows))),
                               [plain.share["contract"], plain.share["model"], plain.total_r2],
                               rtol=1e-9)
    draw = next(bs.multiplicities(24, 1, seed=5))[0]
    copies = draw[rows["world"].to_numpy()]
    copied = shapley_of_rows(rows.loc[rows.index.repeat(copies.astype(int))])
    np.testing.assert_allclose(statistic(rows, copies),
                               [copied.share["contract"], copied.share["model"],
                                copied.total_r2], rtol=1e-8)


def test_shapley_shares_get_intervals() -> None:
    rows = shapley_rows()
    iv = bs.cluster_bootstrap(rows, "world", bs.shapley_statistic(rows, FACTORS, "dup"),
                              replicates=100, seed=4)
    assert iv.lo.shape == (3,) and (iv.lo <= iv.estimate).all() and (iv.estimate <= iv.hi).all()
    assert iv.lo[0] > 0.5 and iv.hi[1] < 0.5  # the contract dominates, with its uncertainty
    assert iv.undefined == 0 and iv.clusters == 24


def test_a_paired_difference_gets_an_interval_from_world_sums() -> None:
    """``limbo compare``'s Δ = mean(b − a) over pairs, resampled by world: its estimate is the
    difference of the two rates."""
    rng = np.random.default_rng(12)
    a = (rng.random(600) < 0.3).astype(float)
    b = np.where(rng.random(600) < 0.8, a, 1 - a)
    worlds = np.repeat(np.arange(60), 10)
    iv = bs.bootstrap_sums(bs.mean_sums(b - a, worlds), bs.ratio, replicates=1000, seed=1)
    assert float(iv.estimate) == pytest.approx(b.mean() - a.mean(), abs=1e-12)
    assert float(iv.lo) < float(iv.estimate) < float(iv.hi) and iv.clusters == 60


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"replicates": 0}, "at least one replicate"), ({"alpha": 1.5}, "between 0 and 1")])
def test_nonsense_settings_are_refused(kwargs, says) -> None:
    y, g = clustered(1)
    with pytest.raises(ValueError, match=says):
        rate_interval(y, g, **kwargs)


def test_rows_without_a_world_are_refused_not_guessed() -> None:
    frame = pd.DataFrame({"world": ["a", None, "b", float("nan")], "y": [1.0, 0.0, 1.0, 0.0]})
    with pytest.raises(ValueError, match="2 row"):
        bs.cluster_bootstrap(frame, "world", lambda f, c: 0.0)
    with pytest.raises(ValueError, match="3 cluster labels for 4 rows"):
        bs.mean_sums(frame["y"], ["a", "b", "c"])


def test_the_order_rows_were_loaded_in_does_not_move_the_interval() -> None:
    """Worlds are drawn by their labels' order, not the rows': the same cell shuffled (as when
    other runs are loaded beside it) gets the same interval."""
    y, g = clustered(8)
    labels = np.array([f"tpl#{k}" for k in g])
    order = np.random.default_rng(1).permutation(len(y))
    first = rate_interval(y, labels, seed=3)
    shuffled = rate_interval(y[order], labels[order], seed=3)
    assert (float(shuffled.lo), float(shuffled.hi)) == pytest.approx(
        (float(first.lo), float(first.hi)), rel=1e-12)
