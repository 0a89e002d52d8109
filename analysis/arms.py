"""The seam every table draws its numbers through: an experiment's episodes, and the arms of
one of its comparisons matched on the comparison's pairing factors.

Arms are matched by *cell*: an episode of arm A enters only if every other arm asked for has an
episode with the same values of the pairing factors (the comparison's ``pair_on``, read from
the run's design). So an arm never holds cases the others lack — a vanilla arm of 515
episodes set against a guard arm of 160 answers a different question than the one printed. Rates
are then taken over each arm's rated episodes (:mod:`limbo.log.rated`), and what matching left out
is counted per arm. Every row keeps its world (``template``, ``instance``) as columns, for
statistics that cluster on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class RecordedComparison:
    """A comparison (:class:`limbo.experiments.comparison.Comparison`) as a run's design recorded
    it, with the experiment it belongs to."""

    experiment: str
    name: str
    factor: str
    arms: tuple[str, ...]
    pair_on: tuple[str, ...]


@dataclass
class Matched:
    """The arms of one comparison on the cells they all have."""

    comparison: RecordedComparison
    arms: dict[str, pd.DataFrame]
    """Arm level → its episodes on the matched cells (every episode, rated or not)."""
    cells: int
    """Matched cells (distinct values of the pairing factors present in every arm)."""
    unmatched: dict[str, int]
    """Arm level → its episodes on cells some other arm lacks (left out)."""
    missing: tuple[str, ...] = ()
    """Arms of the comparison with no episode at all among the rows (not matched against)."""

    def __getitem__(self, arm: str) -> pd.DataFrame:
        return self.arms[arm]

    @property
    def rows(self) -> pd.DataFrame:
        """Every matched episode of every arm."""
        return pd.concat(list(self.arms.values())) if self.arms else pd.DataFrame()

    def note(self) -> str:
        """What the matching kept and left out, for the table's notes."""
        c = self.comparison
        left = ", ".join(f"{arm} {n}" for arm, n in self.unmatched.items() if n) or "none"
        gone = (f" Arms without any episode: {', '.join(self.missing)}." if self.missing
                else "")
        return (f"{c.experiment} comparison '{c.name}': arms {', '.join(self.arms)} matched on "
                f"{', '.join(c.pair_on)} within each seed — {self.cells} cells in every arm; "
                f"episodes left unmatched: {left}.{gone}")


def comparison(designs: list[dict[str, Any]], experiment: str, name: str,
               grids: tuple[str, ...] = ()) -> RecordedComparison | None:
    """Comparison ``name`` of ``experiment`` as the first run holding it recorded it — in a
    grid of ``experiment``'s name or of one of ``grids`` (E2k's episodes may come from a run of
    grid e2 under keys everywhere, whose design records e2's comparisons)."""
    for design in designs:
        for found in design.get("experiments", ()):
            if found["name"] not in (experiment, *grids):
                continue
            for c in found.get("comparisons", ()):
                if c["name"] == name:
                    return RecordedComparison(experiment, name, c["factor"], tuple(c["arms"]),
                                              tuple(c["pair_on"]))
    return None


REPLICATE = "seed"
"""The cell field that tells replicates apart: a cell's seed derives from its grid's seed and its
task only, so every arm of one run of a grid shares it, and runs under other grid seeds do not.
Cells are matched, and episodes paired, within a replicate."""


def within_replicate(pair_on: tuple[str, ...]) -> list[str]:
    """The pairing factors with the replicate added (recorded designs do not name it)."""
    return [*pair_on, *([REPLICATE] if REPLICATE not in pair_on else [])]


def match(rows: pd.DataFrame, c: RecordedComparison,
          arms: tuple[str, ...] | None = None) -> Matched:
    """The ``arms`` among ``rows``, on the cells all of them have. Named ``arms`` must all be
    present (an arm with no episode matches nothing, so every arm is then empty); by default
    the comparison's arms that have episodes, the others listed as missing."""
    present = set(rows[c.factor].astype(str))
    missing: tuple[str, ...] = ()
    if arms is None:
        arms = tuple(a for a in c.arms if a in present)
        missing = tuple(a for a in c.arms if a not in present)
    rows = rows[rows[c.factor].isin(arms).to_numpy()]
    if rows.empty or not arms or any(a not in present for a in arms):
        empty = {arm: rows.iloc[:0] for arm in arms}
        return Matched(c, empty, 0, {a: int((rows[c.factor] == a).sum()) for a in arms}, missing)
    key = rows.groupby(within_replicate(c.pair_on), observed=True, sort=False).ngroup()
    levels = rows[c.factor].astype(str)
    present = levels.groupby(key.to_numpy()).nunique()
    whole = set(present.index[present.to_numpy() == len(arms)])
    inside = key.isin(whole).to_numpy()
    by_arm = {arm: rows[inside & (levels == arm).to_numpy()] for arm in arms}
    left = {arm: int((~inside & (levels == arm).to_numpy()).sum()) for arm in arms}
    return Matched(c, by_arm, len(whole), left, missing)
