"""Cluster bootstrap: percentile intervals that resample worlds, not episodes (stats.md §8).

Episodes of one world are correlated, so a bootstrap that resamples episodes is as
over-confident as an interval that counts them. Here each replicate draws K clusters with
replacement out of the K observed (a world drawn twice counts twice, a world not drawn is
absent) and recomputes the statistic; the interval is the (α/2, 1 − α/2) percentiles of the
replicates. It gives intervals where no formula does (Shapley shares, the difference of two
arms, a figure's points) and checks the clustered interval of a rate.

Every replicate is a vector of per-cluster multiplicities. A statistic linear in per-cluster
sums (a rate, a weighted mean, a paired difference) is then a matrix product over cluster-level
sufficient statistics — :func:`bootstrap_sums` does B replicates at once, never touching rows.
Any other statistic takes the multiplicities as row weights (:func:`cluster_bootstrap`), so it
fits on collapsed, weighted data instead of copied rows.

Draws come from a generator seeded through ``limbo.base.rng.derive_seed(seed, "analysis.bootstrap")``:
the same data and seed give the same interval. No I/O here: ``progress(done, total)`` is called
after each block of replicates so a command can draw a progress bar.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis.labels import cluster_codes
from limbo.analysis.stats import shapley_designs, shapley_fit
from limbo.base.rng import derive_seed

Array = np.ndarray
Progress = Callable[[int, int], None]
"""Called as ``progress(replicates done, replicates in all)``."""
BLOCK = 250
"""Replicates drawn per block: bounds memory (B × K multiplicities) and paces ``progress``."""


@dataclass(frozen=True, eq=False)
class Interval:
    """A statistic's estimate on the data and its percentile interval over the replicates.

    Arrays have the statistic's shape (0-d for a number, 1-d for e.g. one share per factor);
    compare intervals field by field (``==`` on arrays has no single truth value)."""

    estimate: Array
    lo: Array
    hi: Array
    replicates: int
    """B, the replicates drawn."""
    clusters: int
    """K, the clusters resampled."""
    undefined: int
    """Replicates where the statistic was not finite (left out of the percentiles)."""
    seed: int | str


def multiplicities(clusters: int, replicates: int, seed: int | str,
                   progress: Progress | None = None) -> Iterator[Array]:
    """Blocks of (≤ BLOCK) × K multiplicities: each row is how often each cluster is drawn
    when K are drawn with replacement; every row sums to K. The stream depends only on
    (K, seed) — block boundaries do not change the draws."""
    if replicates < 1:
        raise ValueError(f"a bootstrap needs at least one replicate, not {replicates}")
    rng = np.random.default_rng(derive_seed(seed, "analysis.bootstrap"))
    uniform = np.full(clusters, 1.0 / clusters)
    done = 0
    while done < replicates:
        size = min(BLOCK, replicates - done)
        yield rng.multinomial(clusters, uniform, size=size).astype(float)
        done += size
        if progress is not None:
            progress(done, replicates)


def _interval(estimate: Any, reps: Array, clusters: int, seed: int | str,
              alpha: float) -> Interval:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not between 0 and 1")
    est = np.asarray(estimate, dtype=float)
    reps = reps.reshape((len(reps), *est.shape))
    finite = np.isfinite(reps).reshape(len(reps), -1).all(axis=1)
    kept = reps[finite]
    if len(kept) == 0:
        lo = hi = np.full(est.shape, np.nan)
    else:
        lo, hi = np.quantile(kept, [alpha / 2, 1 - alpha / 2], axis=0)
    return Interval(est, np.asarray(lo), np.asarray(hi), len(reps), clusters,
                    int((~finite).sum()), seed)


def bootstrap_sums(sums: Array, statistic: Callable[[Array], Array], *, replicates: int = 1000,
                   seed: int | str = 0, alpha: float = 0.05,
                   progress: Progress | None = None) -> Interval:
    """Cluster bootstrap of a statistic of column totals. ``sums`` is K × s (one row per
    cluster: its sufficient statistics, e.g. Σw·y and Σw); ``statistic`` maps an R × s array
    of totals to R values (or R × d) and is applied to the observed totals and to every block
    of replicate totals (multiplicities @ sums) — vectorised, so B = 1000 over thousands of
    clusters takes well under a second."""
    sums = np.asarray(sums, dtype=float)
    k = len(sums)
    if k == 0:
        raise ValueError("bootstrap of no clusters")
    estimate = np.asarray(statistic(sums.sum(axis=0, keepdims=True)))[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        reps = [np.asarray(statistic(draw @ sums))
                for draw in multiplicities(k, replicates, seed, progress)]
    return _interval(estimate, np.concatenate(reps), k, seed, alpha)


def cluster_bootstrap(frame: pd.DataFrame, cluster: str | Sequence[Any] | Array,
                      statistic: Callable[[pd.DataFrame, Array], Any], *,
                      replicates: int = 1000, seed: int | str = 0, alpha: float = 0.05,
                      progress: Progress | None = None) -> Interval:
    """Cluster bootstrap of any statistic of a frame. ``cluster`` is a column name or one
    label per row. ``statistic(frame, weights)`` gets each row's multiplicity in the replicate
    (all ones for the estimate) and returns a number or a 1-d array; a resampled world counts
    as many times as it was drawn, so a statistic that honours frequency weights (a weighted
    mean, cells collapsed with weights) is the statistic of the resampled data."""
    labels = frame[cluster] if isinstance(cluster, str) else cluster
    codes, k = cluster_codes(labels, len(frame))
    if k == 0:
        raise ValueError("bootstrap of no clusters")
    estimate = statistic(frame, np.ones(len(frame)))
    reps = [np.asarray(statistic(frame, counts[codes]), dtype=float)
            for draw in multiplicities(k, replicates, seed, progress) for counts in draw]
    return _interval(estimate, np.array(reps), k, seed, alpha)


def mean_sums(y: Sequence[float] | Array, clusters: Sequence[Any] | Array,
              weights: Array | None = None) -> Array:
    """Per-cluster (Σw·y, Σw): the sufficient statistics of a weighted mean of ``y`` — a rate
    for 0/1 outcomes, a paired difference for b − a in {−1, 0, 1} — for :func:`bootstrap_sums`
    with :func:`ratio`. The weights stay those of the data (e.g. 1/size of the template within
    the cell), as a world drawn twice brings its episodes twice."""
    y = np.asarray(y, dtype=float)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    codes = cluster_codes(clusters, len(y))[0]
    return np.column_stack([np.bincount(codes, w * y), np.bincount(codes, w)])


def bootstrap_rate(y: Sequence[float] | Array, clusters: Sequence[Any] | Array,
                   weights: Array | None = None, *, replicates: int = 1000,
                   seed: int | str = 0, alpha: float = 0.05,
                   progress: Progress | None = None) -> Interval:
    """The cluster-bootstrap interval of a weighted rate: the check §8 asks of the clustered
    interval of :func:`~limbo.analysis.cluster.clustered_rate` on the same arguments."""
    return bootstrap_sums(mean_sums(y, clusters, weights), ratio, replicates=replicates,
                          seed=seed, alpha=alpha, progress=progress)


def ratio(totals: Array) -> Array:
    """First column over second: the weighted mean of :func:`mean_sums` totals."""
    out: Array = totals[:, 0] / totals[:, 1]
    return out


def shapley_statistic(frame: pd.DataFrame, factors: Sequence[str],
                      outcome: str) -> Callable[[pd.DataFrame, Array], Array]:
    """Shapley shares of ``factors`` (in that order) and then the total pseudo-R², as a
    statistic for :func:`cluster_bootstrap` over ``frame``. The rows are sorted into the
    cells of the factors and the designs built once; a replicate only re-counts each cell with
    the rows' multiplicities and refits — the fits, not the data, are its cost."""
    factors = list(factors)
    grouped = frame.groupby(factors, observed=True, sort=True)
    cell, cells = grouped.ngroup().to_numpy(), grouped.size().reset_index()[factors]
    designs = shapley_designs(cells, factors)
    hits = frame[outcome].to_numpy(float)

    def statistic(rows: pd.DataFrame, copies: Array) -> Array:
        if len(rows) != len(hits):
            raise ValueError(f"the statistic was built for {len(hits)} rows, not {len(rows)}")
        found = shapley_fit(np.bincount(cell, hits * copies, len(cells)),
                            np.bincount(cell, copies, len(cells)), designs, factors)
        return np.array([*(found.share[f] for f in factors), found.total_r2])

    return statistic
