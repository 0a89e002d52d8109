"""What every table and figure works from: the loaded episodes, the weighting scheme, the
paper's experiments and their matched arms (:mod:`limbo.analysis.arms`), and the per-episode
facts that need the event log (decoded once, only for the rows that ask).

An experiment's episodes are those its runs recorded as its own (:mod:`limbo.analysis.runs`),
not whatever happens to share its factor levels: loading another run never changes a number
that does not use it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from limbo.analysis import paper
from limbo.analysis.arms import Matched, comparison, match
from limbo.analysis.cluster import ClusteredRate
from limbo.analysis.loader import Loaded
from limbo.analysis.population import left_out, population
from limbo.analysis.recovery import Recovery, classify
from limbo.analysis.runs import BUILT_IN, tool_kinds
from limbo.analysis.seeds import Seeds
from limbo.analysis.stats import equal_weights
from limbo.analysis.table import Behind
from limbo.analysis.uncertainty import Uncertainty

if TYPE_CHECKING:
    from limbo.analysis.table import Table

T = TypeVar("T")

WEIGHTINGS = ("template", "instance", "none")
"""Equal weight per task template (default), per task instance, or per episode."""

CONDITION_ORDER = ("vanilla", "aware", "reflect", "sdk-retry", "rules", "vbr", "guard",
                   "state-oracle", "outcome-oracle", "plain")

EXPERIMENTS = {"e1": "E1: minimal harness, vanilla condition, native contract",
               "e1s": "E1s: ten instances of the batch template",
               "e2": "E2: the recovery conditions, native contract",
               "e2k": "E2k: the recovery conditions, keys everywhere",
               "e3": "E3: each harness under vanilla and guard, native contract",
               "e3k": "E3k: each harness under vanilla and guard, keys everywhere",
               "e5": "E5: wait conditions, guard and oracles under late commits",
               "e6": "E6: vanilla and plain instruction on the same cells"}
"""The paper's experiments, by the name of the built-in grid that produces each."""
CELL_ORDER = ("template", "focal_write", "instance", "fault", "contract", "condition", "harness",
              "service", "seed", "model", "episode_id")
"""The order of an experiment's episodes: by cell, the model last but one."""
REFERENCE_CAVEAT = ("Reference policies: rows for models named policy/* are scripted "
                    "policies shipped with LIMBO, not language models; their numbers show what "
                    "the benchmark measures, not how any model behaves.")


def absent(*grids: str) -> str:
    """The message of a table (or cell) without data: which grids produce it."""
    runs = " and ".join(f"`limbo run {g}`" for g in grids)
    what = "; ".join(EXPERIMENTS.get(g, g) for g in grids)
    return f"No data — produced by grid{'s' if len(grids) > 1 else ''} {', '.join(grids)} " \
           f"({runs}; {what})"


@dataclass(frozen=True)
class TracedRate(ClusteredRate):
    """A clustered rate with the episodes behind it (see :class:`~limbo.analysis.table.Behind`)
    and, when a bootstrap was asked for, its cluster-bootstrap interval (NaN otherwise)."""

    behind: Behind | None = field(default=None, compare=False, repr=False)
    boot_lo: float = math.nan
    boot_hi: float = math.nan


RATE_FIELDS = tuple(f.name for f in fields(ClusteredRate))


def ordered(levels: Any, order: tuple[str, ...] = CONDITION_ORDER) -> list[str]:
    """Levels in the paper's order first, then the rest alphabetically."""
    present = set(levels)
    return [c for c in order if c in present] + sorted(present - set(order))


@dataclass
class Data:
    """The loaded episodes with the chosen weighting and unit of replication."""

    loaded: Loaded
    weighting: str = "template"
    uncertainty: Uncertainty = field(default_factory=Uncertainty)
    world: str = BUILT_IN
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

    def experiment(self, name: str) -> pd.DataFrame:
        """Every episode of the paper's experiment ``name`` (:mod:`limbo.analysis.population`:
        its grids' runs, its caption's contract, harness and condition, the built-in
        services), rated or not, in the order of their cells (:data:`CELL_ORDER`): which run an
        episode was loaded from first (shared cells load once) never changes the order of a
        sum, so never the last digit of a number; nor does the model's name, which every
        episode id digests."""
        return self.cached(("experiment", name), lambda: self.frame[self.member(name)]
                           .sort_values(list(CELL_ORDER), kind="stable"))

    def member(self, name: str) -> np.ndarray:
        """Which rows of the frame are experiment ``name``'s (a boolean mask)."""
        return self.cached(("member", name), lambda: population(self.frame, name, self.world))

    @property
    def seeds(self) -> Seeds:
        """Each row's world and seed, for counting replicates (:mod:`limbo.analysis.seeds`)."""
        return self.cached("seeds", lambda: Seeds.of(self.frame))

    def matched(self, experiment: str, name: str, rows: pd.DataFrame | None = None,
                arms: tuple[str, ...] | None = None) -> Matched | None:
        """The arms of ``experiment``'s comparison ``name`` (all, or ``arms``) on the cells they
        all have, among ``rows`` (default: the whole experiment); ``None`` when no loaded run
        records that comparison."""
        found = comparison([r.design for r in self.loaded.runs], experiment, name,
                           paper.CAPTIONS.get(experiment, ((), {}))[0])
        if found is None:
            return None
        if rows is not None:
            return match(rows, found, arms)
        return self.cached(("matched", experiment, name, arms),
                           lambda: match(self.experiment(experiment), found, arms))

    def waits(self) -> dict[str, float]:
        """Each wait condition's bound Δ as the loaded runs recorded it (the first run wins)."""
        found: dict[str, float] = {}
        for run in self.loaded.runs:
            for condition, bound in run.design.get("waits", {}).items():
                found.setdefault(condition, float(bound))
        return found

    def modes_of(self, families: list[str]) -> set[str]:
        """Every mode counting in one of ``families``, as the loaded runs recorded them."""
        return self.loaded.modes_of(families)

    def sources(self, *experiments: str) -> list[str]:
        """One line per loaded run holding episodes of ``experiments``: its grids,
        fingerprint, LIMBO and grader versions (no path: the same wherever it is stored)."""
        return self.cached(("sources", experiments), lambda: self._sources(experiments))

    def _sources(self, experiments: tuple[str, ...]) -> list[str]:
        inside = np.zeros(len(self.frame), dtype=bool)
        for name in experiments:
            inside |= self.member(name)
        grids = {g for name in experiments for g in paper.CAPTIONS.get(name, ((name,), {}))[0]}
        return self.describe_runs(inside, grids)

    def describe_runs(self, rows: np.ndarray, grids: set[str] | None = None) -> list[str]:
        """One line per loaded run that holds any of the rows ``rows`` (a mask) — as one of
        ``grids``' episodes, if given — with how many of its grid's episodes it holds when
        not all."""
        found = []
        for run in self.loaded.runs:
            mine = run.held.copy() if grids is None else np.zeros_like(run.held)
            for grid in grids or ():
                mine |= run.members.get(grid, mine)
            if (mine & rows).any():
                found.append(run.describe(int(run.held.sum())))
        return sorted(set(found))

    def stamp(self, table: Table, *experiments: str) -> Table:
        """Give ``table`` its provenance (the runs of ``experiments`` it was computed from —
        by default the experiments its number reads, :data:`paper.TABLE_EXPERIMENTS`), what of
        their grids' episodes it leaves out and why (:func:`~limbo.analysis.population.
        left_out`) and, when any of their episodes is a reference policy's, the caveat that
        says so."""
        experiments = experiments or paper.TABLE_EXPERIMENTS[table.number]
        table.sources = self.sources(*experiments)
        table.left_out = self.cached(("left out", experiments),
                                     lambda: left_out(self.frame, experiments, self.world))
        if self.world != BUILT_IN:
            table.notes.append(f"World: world file {self.world} (--world), in place of the "
                               f"built-in services the paper ran on.")
        models = set().union(*(set(map(str, self.experiment(e)["model"].unique()))
                               for e in experiments))
        if any(m.startswith("policy/") for m in models):
            table.caveat = REFERENCE_CAVEAT
        return table

    def rate(self, rows: pd.DataFrame, outcome: str) -> TracedRate:
        """Weighted rate of ``outcome`` over ``rows`` (weights computed within them) with its
        interval for the chosen unit of replication (:class:`Uncertainty`); it remembers the
        rows, so a table entry made from it links to its episodes."""
        return self.rates(rows, (outcome,))[0]

    def rates(self, rows: pd.DataFrame, outcomes: tuple[str, ...]) -> list[TracedRate]:
        """:meth:`rate` of each of ``outcomes`` over the same ``rows`` (weights computed once).

        A rate is a function of the outcomes, worlds and weights of its rows, in order, and of
        the unit and bootstrap chosen; two cells alike in all of them (a scripted policy under
        prompts it ignores) share one computation — the summary's 2,200 rates on the paper
        grid are 386 distinct ones."""
        weights, found = self.weights(rows), []
        u = self.uncertainty
        shape = (self.weighting, u.cluster, u.replicates, _digest(rows["template"]),
                 _digest(rows["instance"]))
        for outcome in outcomes:
            y = rows[outcome].to_numpy()
            r, boot = self.cached(("rate", outcome, *shape, _digest(y)),
                                  functools.partial(u.rate, y, rows, weights, f"rate:{outcome}"))
            lo, hi = (math.nan, math.nan) if boot is None else (float(boot.lo), float(boot.hi))
            found.append(TracedRate(**{name: getattr(r, name) for name in RATE_FIELDS},
                                    behind=Behind(rows.index, outcome), boot_lo=lo, boot_hi=hi))
        return found

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
            kinds = tool_kinds(self.loaded.runs)
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


def _digest(values: Any) -> bytes:
    """A short digest of a column or array's values in order (categories by their codes: one
    frame's categories are shared by all its slices)."""
    if isinstance(values, pd.Series):
        values = values.cat.codes if isinstance(values.dtype, pd.CategoricalDtype) else values
        values = values.to_numpy()
    data = np.ascontiguousarray(values)
    body = data.tobytes() if data.dtype.kind != "O" else "\x1f".join(map(str, data)).encode()
    return hashlib.blake2b(body + str(data.dtype).encode(), digest_size=16).digest()


def _delay(events: Iterator[dict[str, Any]]) -> float:
    for event in events:
        if event.get("type") == "fault":
            value = (event.get("detail") or {}).get("delay_after_timeout_s")
            return math.nan if value is None else float(value)
    return math.nan


def wait_bound(condition: str, recorded: dict[str, float] | None = None) -> float | None:
    """The assumed in-flight bound Δ of a ``wait-Δ`` condition: as the runs recorded it
    (``recorded``, from their designs; a run that recorded none is read against the built-in
    paper grid's design, which records the paper's waits), else the number in its name; None
    for every other condition. Never today's registry: a condition registered since the run,
    or registered differently, must not change what its table says."""
    if not condition.startswith("wait-"):
        return None
    if recorded and condition in recorded:
        return float(recorded[condition])
    match = re.fullmatch(r"wait-(\d+)", condition)
    return float(match.group(1)) if match else None
