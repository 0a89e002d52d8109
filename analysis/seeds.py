"""Replicates: runs of one grid under different seeds.

A cell's seed derives from its grid's seed and its task (template, focal write, instance) only
(:func:`limbo.experiments.grid.world_seed`), so every arm of one run shares it and a run under
another grid seed has another. The seeds a task has among a table cell's episodes are that
cell's replicates. Cells are matched and episodes paired within a replicate
(:data:`limbo.analysis.arms.REPLICATE`); the replicates of one world stay one cluster (the world
is the unit of replication, whatever its seed: docs/analysis.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

TASK = ("template", "focal_write", "instance")


@dataclass(frozen=True)
class Seeds:
    """Each row's task and seed as integer codes, by the row's label in the loaded frame."""

    index: pd.Index
    task: np.ndarray
    seed: np.ndarray

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Seeds:
        task = frame.groupby(list(TASK), observed=True, sort=False).ngroup().to_numpy()
        seed = pd.factorize(frame["seed"].to_numpy())[0]
        return cls(frame.index, task.astype(np.int64), seed.astype(np.int64))

    def count(self, labels: Any) -> int:
        """The replicates of the rows ``labels`` (index labels): the most seeds any one task
        has among them (0 without rows)."""
        return self.count_at(self.index.get_indexer(labels))

    def count_at(self, at: np.ndarray) -> int:
        """:meth:`count` of the rows at positions ``at`` of the loaded frame."""
        if not len(at):
            return 0
        stride = int(self.seed.max()) + 1
        distinct = np.unique(self.task[at] * stride + self.seed[at])  # (task, seed) pairs
        return int(np.unique(distinct // stride, return_counts=True)[1].max())

    def note(self, counts: list[int]) -> str:
        """What a table says of its cells' replicates (``counts``: one per cell with episodes)."""
        counts = [c for c in counts if c]
        if not counts:
            return ""
        low, high = min(counts), max(counts)
        how = ("runs of one grid under different seeds: cells are matched and episodes paired "
               "within a seed, and a world's seeds are one cluster")
        if low == high:
            what = "one seed of each world" if high == 1 else f"{high} seeds of each world"
            return f"Replicates: {what} in every cell{'' if high == 1 else f' ({how})'}."
        fewer = sum(c < high for c in counts)
        return (f"Replicates: {low}–{high} seeds of a world per cell ({fewer} of {len(counts)} "
                f"cells have fewer than {high}; {how}).")
