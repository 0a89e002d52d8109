"""How sure a number is: which episodes count as one unit, and the interval or test that follows.

Every table, figure and ``limbo compare`` asks this one object (the ``--cluster`` and
``--bootstrap`` options of the three commands), so a rate, a paired test and a bootstrap
interval never disagree about what the independent unit is (``reference/stats.md`` §8):

* ``world`` (default): the task template and instance an episode ran in. Every world is reused
  across models, faults, conditions and seeds, and its episodes go together;
* ``template``: coarser, for when the instances of a template behave alike;
* ``none``: every episode (every pair, in a paired test) its own unit — the episode-level
  computation on the same matched arms, so an older output can still be explained.

The cluster is derived from each episode's cell (template, instance), never stored. The
bootstrap is off (``replicates`` 0) unless asked for; when on, every draw is seeded, so the same
logs give the same interval, and ``report(what, done, total)`` hears of its progress.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis import bootstrap as bs
from limbo.analysis.cluster import CLUSTERINGS, ClusteredRate, cluster_ids, clustered_rate
from limbo.analysis.paired import ClusteredMcNemar, clustered_mcnemar
from limbo.errors import UsageError

Array = np.ndarray
Report = Callable[[str, int, int], None]
"""Called as ``report(what is being bootstrapped, replicates done, replicates in all)``."""
NOUNS = {"world": "worlds", "template": "templates", "none": "episodes"}
"""What the clusters are called in a table's notes and a figure's title."""
SEED = 0
"""Every bootstrap and Monte Carlo draw of the analysis is seeded from this and what it is of."""


@dataclass(frozen=True)
class Uncertainty:
    """The unit of replication and the bootstrap, as the command line chose them."""

    cluster: str = "world"
    replicates: int = 0
    """B, the cluster-bootstrap replicates of every interval that has one; 0: none drawn."""
    report: Report | None = None

    def __post_init__(self) -> None:
        if self.cluster not in CLUSTERINGS:
            raise UsageError(f"--cluster {self.cluster!r}: choose from {', '.join(CLUSTERINGS)}")
        if self.replicates < 0:
            raise UsageError(f"--bootstrap {self.replicates}: a number of replicates, 0 for none")

    @property
    def noun(self) -> str:
        """The clusters in words, plural: "worlds", "templates" or "episodes"."""
        return NOUNS[self.cluster]

    def labels(self, rows: pd.DataFrame) -> Array:
        """Each row's cluster: its world or template, or (``none``) its own position."""
        found = cluster_ids(rows, self.cluster)
        return np.arange(len(rows)) if found is None else found

    def rate(self, y: Any, rows: pd.DataFrame, weights: Array | None,
             what: str = "rate") -> tuple[ClusteredRate, bs.Interval | None]:
        """The weighted rate of ``y`` over ``rows`` with its clustered Wilson interval, and
        (with a bootstrap) its cluster-bootstrap interval, the check §8 asks for."""
        found = clustered_rate(y, cluster_ids(rows, self.cluster), weights)
        if not self.replicates or found.n == 0:
            return found, None
        return found, self.mean(np.asarray(y, dtype=float), rows, weights, what)

    def mean(self, values: Array, rows: pd.DataFrame, weights: Array | None,
             what: str) -> bs.Interval | None:
        """The cluster-bootstrap interval of a weighted mean of ``values`` (a rate for 0/1
        values, a paired difference for b − a), or None without a bootstrap or values."""
        if not self.replicates or len(values) == 0:
            return None
        sums = bs.mean_sums(values, self.labels(rows), weights)
        return bs.bootstrap_sums(sums, bs.ratio, replicates=self.replicates, seed=self.seed(what),
                                 progress=self.progress(what))

    def frame(self, rows: pd.DataFrame, statistic: Callable[[pd.DataFrame, Array], Any],
              what: str) -> bs.Interval | None:
        """The cluster-bootstrap interval of any statistic of ``rows`` (e.g. Shapley shares),
        or None without a bootstrap."""
        if not self.replicates or rows.empty:
            return None
        return bs.cluster_bootstrap(rows, self.labels(rows), statistic,
                                    replicates=self.replicates, seed=self.seed(what),
                                    progress=self.progress(what))

    def paired(self, a: Any, b: Any, rows: pd.DataFrame, what: str) -> ClusteredMcNemar:
        """The sign-flip test (primary), Durkalski's statistic and the exact McNemar test of
        paired outcomes ``a``, ``b`` (one per row of ``rows``, which holds each pair's world)."""
        return clustered_mcnemar(np.asarray(a, dtype=bool), np.asarray(b, dtype=bool),
                                 self.labels(rows), seed=self.seed(what))

    def seed(self, what: str) -> str:
        """The seed of a draw: fixed, and told apart by what is drawn, so one number's draws
        never depend on which other numbers were computed first."""
        return f"{SEED}:{what}"

    def progress(self, what: str) -> bs.Progress | None:
        report = self.report
        if report is None:
            return None

        def progress(done: int, total: int) -> None:
            report(what, done, total)

        return progress

    def describe(self) -> str:
        """One sentence for a table's notes: the unit, and the bootstrap if any."""
        unit = {"world": "episodes clustered by world (template, instance)",
                "template": "episodes clustered by task template",
                "none": "every episode its own unit (--cluster none)"}[self.cluster]
        boot = (f"; cluster bootstrap: B = {self.replicates}, seeded, percentile"
                if self.replicates else "")
        return unit + boot
