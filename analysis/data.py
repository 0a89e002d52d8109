"""What every table and figure works from: the loaded episodes, the weighting scheme, the
populations the paper's experiments define, and the per-episode facts that need the event log
(decoded once, only for the rows that ask).

Populations are defined by cell factors, not by which grid wrote a record, so any mix of runs
works and shared cells (E1's instance 0 is also E2's vanilla arm) are used wherever they fit.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from limbo.analysis.loader import Loaded, modes_of
from limbo.analysis.recovery import Recovery, classify, tool_kinds
from limbo.analysis.stats import Rate, equal_weights, kish_rate
from limbo.analysis.table import Behind

T = TypeVar("T")

WEIGHTINGS = ("template", "instance", "none")
"""Equal weight per task template (default), per task instance, or per episode."""

CONDITION_ORDER = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr", "guard",
                   "state-oracle", "outcome-oracle", "plain")
LOST_ACK_500_PARTIAL = ("timeout_post", "http500_post", "partial_batch")


GRID_FACTORS = ("harness", "condition", "contract", "fault")
"""The factors whose levels come from the grids (not from what the runs happened to use)."""


@functools.cache
def grid_levels(grids: tuple[str, ...]) -> tuple[tuple[str, frozenset[str]], ...]:
    """The harness, condition, contract and fault levels the built-in ``grids`` cross
    (models, templates and instances are whatever the runs used)."""
    from limbo.experiments.grid import FACTOR_FIELDS, load_grid, resolved

    levels: dict[str, set[str]] = {column: set() for column in GRID_FACTORS}
    for name in grids:
        found = resolved(load_grid(name))
        for column in GRID_FACTORS:
            levels[column] |= set(found[FACTOR_FIELDS[column]])
    return tuple((column, frozenset(values)) for column, values in levels.items())


@dataclass(frozen=True)
class TracedRate(Rate):
    """A rate with the episodes behind it (see :class:`~limbo.analysis.table.Behind`)."""

    behind: Behind | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Population:
    """The episodes of one experiment: those whose harness, condition, contract and fault are
    levels the experiment's built-in grids cross — whichever run wrote them."""

    name: str
    grids: tuple[str, ...]
    description: str

    def of(self, frame: pd.DataFrame) -> pd.DataFrame:
        mask = np.ones(len(frame), dtype=bool)
        for column, levels in grid_levels(self.grids):
            mask &= frame[column].isin(levels).to_numpy()
        return frame[mask]

    def absent(self) -> str:
        runs = " and ".join(f"`limbo run {g}`" for g in self.grids)
        return f"no {self.name} episodes ({self.description}) in the logs given; {runs} " \
               f"produce{'s' if len(self.grids) == 1 else ''} them"


E1 = Population("E1", ("e1",), "minimal harness, vanilla condition, native contract")
E2 = Population("E2/E2k", ("e2", "e2k"), "minimal harness under the nine recovery conditions")
E5 = Population("E5", ("e5",), "wait conditions, guard and oracles under late commits")
E3 = Population("E3/E3k", ("e3", "e3k"), "each harness under vanilla and guard")
E6 = Population("E6", ("e6",), "vanilla and plain on the same cells")


def committed_modes() -> set[str]:
    """The paper's committed faults: read-back resolves ∪ late commit."""
    return modes_of(["read-back resolves", "late commit"])


def ordered(levels: Any, order: tuple[str, ...] = CONDITION_ORDER) -> list[str]:
    """Levels in the paper's order first, then the rest alphabetically."""
    present = set(levels)
    return [c for c in order if c in present] + sorted(present - set(order))


@dataclass
class Data:
    """The loaded episodes with the chosen weighting."""

    loaded: Loaded
    weighting: str = "template"
    _recoveries: dict[Any, Recovery | None] = field(default_factory=dict)
    _delays: dict[Any, float] = field(default_factory=dict)
    _memo: dict[Any, Any] = field(default_factory=dict)

    def cached(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per ``key`` (a fit two tables share, e.g. Table 4 and H2)."""
        if key not in self._memo:
            self._memo[key] = compute()
        value: T = self._memo[key]  # stored by the same key's compute, so of its type
        return value

    @property
    def frame(self) -> pd.DataFrame:
        return self.loaded.frame

    @property
    def rated(self) -> pd.DataFrame:
        return self.cached("rated", lambda: self.frame[self.frame["rated"]])

    def rate(self, rows: pd.DataFrame, outcome: str) -> Rate:
        """Kish-weighted rate of ``outcome`` over ``rows``, weights computed within them; it
        remembers the rows, so a table entry made from it links to its episodes."""
        r = kish_rate(rows[outcome].to_numpy(), self.weights(rows))
        return TracedRate(r.successes, r.n, r.rate, r.n_eff, r.lo, r.hi,
                          behind=Behind(rows.index, outcome))

    def weights(self, rows: pd.DataFrame) -> np.ndarray | None:
        if self.weighting == "none" or rows.empty:
            return None
        if self.weighting == "instance":
            return equal_weights(rows["template"].astype(str) + "#" + rows["instance"].astype(str))
        return equal_weights(rows["template"])

    def mean(self, rows: pd.DataFrame, column: str) -> float:
        """Weighted mean of ``column`` (same weights as the rates); NaN when empty."""
        values = rows[column].to_numpy(float)
        ok = ~np.isnan(values)
        if not ok.any():
            return math.nan
        w = self.weights(rows[ok])
        return float(np.average(values[ok], weights=w))

    def recoveries(self, rows: pd.DataFrame) -> pd.Series:
        """The recovery classification of each row (``None`` where the focal write did not
        fail); event logs are decoded once per episode."""
        todo = rows[[i not in self._recoveries for i in rows.index]]
        if not todo.empty:
            kinds = tool_kinds()
            focal = dict(zip(todo.index, todo["focal_write"].astype(str), strict=True))
            self._recoveries.update(self.loaded.each_events(
                todo, lambda index, events: classify(events, focal[index], kinds)))
        return pd.Series([self._recoveries[i] for i in rows.index], index=rows.index,
                         dtype=object)

    def delays(self, rows: pd.DataFrame) -> pd.Series:
        """The in-flight delay δ after the timeout, from each row's fault event (NaN if none)."""
        todo = rows[[i not in self._delays for i in rows.index]]
        if not todo.empty:
            self._delays.update(self.loaded.each_events(todo, lambda _, events: _delay(events)))
        return pd.Series([self._delays[i] for i in rows.index], index=rows.index, dtype=float)


def _delay(events: Iterator[dict[str, Any]]) -> float:
    for event in events:
        if event.get("type") == "fault":
            value = (event.get("detail") or {}).get("delay_after_timeout_s")
            return math.nan if value is None else float(value)
    return math.nan


def wait_bound(condition: str) -> float | None:
    """The assumed in-flight bound Δ of a ``wait-Δ`` condition (its ``wait_s``); None for
    every other condition."""
    from limbo.registry import entries

    if not condition.startswith("wait-"):
        return None
    value = getattr(entries("condition").get(condition), "wait_s", None)
    if value is None:
        match = re.fullmatch(r"wait-(\d+)", condition)
        return float(match.group(1)) if match else None
    return float(value)
