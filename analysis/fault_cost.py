"""The cost of a fault: what an injected failure costs an agent per episode, against the same
agent with no fault (``limbo tables --table 15``, and the HTML report).

For every fault mode the loaded runs hold beside ``none`` — sandbox grids, world files, ``limbo
mcp`` and ``limbo proxy`` runs alike: it reads nothing but the records — and for each quantity
a run records per episode (tool calls, model calls, input and output tokens, dollars, simulated
agent time, wall time), the table shows the mean per episode under the mode and its difference
from ``none``, with a 95% interval that counts worlds, not episodes.

* Episodes: the rated ones (the fault fired, not errored: :mod:`limbo.log.rated`) — an episode
  whose fault never fired cost what a fault-free one does, and an errored one measures the
  sandbox. With several models, each model has its block: models differ in cost far more than
  faults do, and pooling them would weigh the faults by the models that ran them.
* Means are weighted as every mean of the tables (``--weights``; by default each task template
  weighs the same within the mode), and so is ``none``'s.
* The difference Δ = mean(mode) − mean(none) takes the cluster-robust standard error of two arms
  that share worlds (:func:`limbo.analysis.tost.tost_clustered_arms`): episodes paired by cell
  (the same world under the mode and under ``none``) have their correlation counted, and
  episodes of worlds only one arm ran still count. The interval is Δ ± t(K − 1)·SE, K the
  clusters (``--cluster``: worlds by default); a mean's own interval is the same construction
  with one arm.
* *Model calls* are the episode's model turns (each one call; a provider's retries of a failed
  call are not in the record). Dollars are over the episodes whose price is known (``cost_usd``
  is ``null`` for an unpriced model; those are counted in the note). Wall time is
  ``runtime.wall_s``, the one field that differs between runs of one cell: it measures this
  machine, not the agent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from limbo.analysis import dist
from limbo.analysis import table as t
from limbo.analysis.data import Data
from limbo.analysis.labels import cluster_codes
from limbo.analysis.tost import tost_clustered_arms

NUMBER = 15
BASELINE = "none"
QUANTITIES = (("tool_calls", "tool calls", 1), ("model_turns", "model calls", 1),
              ("input_tokens", "input tokens", 0), ("output_tokens", "output tokens", 0),
              ("cost_usd", "USD", 4), ("agent_time_s", "sim time (s)", 0),
              ("wall_s", "wall time (s)", 3))
"""(column, header, digits) of every quantity, in the table's order."""


def table15(data: Data) -> t.Table:
    """Rows: model (when several) × fault mode, ``none`` first; each cell the mean per episode
    and, for a fault, its difference from ``none`` with a 95% clustered interval."""
    table = t.Table(NUMBER, "The cost of a fault: per episode under each fault mode vs none",
                    ["model", "fault", "episodes", *(h for _, h, _ in QUANTITIES)], keys=2)
    rows = data.rated
    if rows.empty:
        table.absent = "No data — any run with rated episodes under `none` and a fault mode"
        return table
    models = sorted(map(str, rows["model"].unique()))
    for model in models:
        mine = rows[rows["model"].astype(str) == model]
        _block(data, table, model if len(models) > 1 else "all", mine)
    stamp(data, table, rows)
    table.notes.append(_note(data, rows))
    return table


def _block(data: Data, table: t.Table, model: str, rows: pd.DataFrame) -> None:
    faults = rows["fault"].astype(str).to_numpy()
    base = _Arm(data, rows[faults == BASELINE])
    modes = sorted(set(faults.tolist()) - {BASELINE})
    for mode in [BASELINE, *modes] if len(base.rows) else modes:
        mine = base if mode == BASELINE else _Arm(data, rows[faults == mode])
        cells = [_cell(mine, base if mode != BASELINE else None, column, digits)
                 for column, _, digits in QUANTITIES]
        table.add(t.label(model), t.label(mode), t.count(len(mine.rows)), *cells)


@dataclass(frozen=True)
class _Part:
    """An arm's episodes with a value of one quantity: the values, their weights (computed
    within them, as every mean of the tables) and their clusters."""

    y: np.ndarray
    weights: np.ndarray | None
    labels: np.ndarray

    @property
    def mean(self) -> float:
        return float(np.average(self.y, weights=self.weights))


class _Arm:
    """One fault mode's rows. A cell reads the rows with a value of its quantity; the weights
    and clusters of those rows are computed once for every quantity that has a value on the
    same rows (on most runs all of them do), and no frame is copied for a cell."""

    def __init__(self, data: Data, rows: pd.DataFrame) -> None:
        self.data, self.rows = data, rows
        self._found: dict[bytes, tuple[np.ndarray | None, np.ndarray]] = {}

    def part(self, column: str) -> _Part | None:
        """The rows with a value of ``column``; None when none has one."""
        y = self.rows[column].to_numpy(float)
        ok = ~np.isnan(y)
        if not ok.any():
            return None
        key = b"" if ok.all() else ok.tobytes()
        if key not in self._found:
            mine = self.rows if not key else self.rows[ok]
            self._found[key] = (self.data.weights(mine), self.data.uncertainty.labels(mine))
        weights, labels = self._found[key]
        return _Part(y[ok], weights, labels)


def _cell(arm: _Arm, base: _Arm | None, column: str, digits: int) -> t.Entry:
    """``mean (Δ [lo, hi])``, or the mean alone for ``none`` and without a baseline."""
    rows = arm.part(column)
    if rows is None:
        return t.Entry(t.EMPTY, denominator=0)
    mean = rows.mean
    other = None if base is None else base.part(column)
    if other is None:
        lo, hi, k = mean_interval(rows)
        return t.Entry(f"{mean:.{digits}f}", mean, denominator=len(rows.y), lo=lo, hi=hi,
                       clusters=k)
    diff, lo, hi, k = difference(arm.data, rows, other)
    interval = "" if math.isnan(lo) else f" [{lo:+.{digits}f}, {hi:+.{digits}f}]"
    shown = f"{mean:.{digits}f} ({diff:+.{digits}f}{interval})"
    return t.Entry(shown, diff, denominator=len(rows.y), lo=lo, hi=hi, clusters=k)


def difference(data: Data, rows: _Part, base: _Part) -> tuple[float, float, float, int]:
    """(Δ, lo, hi, clusters) of mean(``rows``) − mean(``base``), 95% on t(K − 1)."""
    arm = np.r_[np.ones(len(rows.y), bool), np.zeros(len(base.y), bool)]
    weights = (None if rows.weights is None or base.weights is None
               else np.concatenate([np.asarray(rows.weights, float),
                                    np.asarray(base.weights, float)]))
    labels = (np.arange(len(arm)) if data.uncertainty.cluster == "none"  # each its own
              else np.concatenate([rows.labels, base.labels]))
    found = tost_clustered_arms(np.concatenate([rows.y, base.y]), arm, labels, weights)
    diff = rows.mean - base.mean  # also with one cluster (no SE)
    lo, hi = _around(diff, found.se, found.clusters)
    return diff, lo, hi, int(found.clusters)


def mean_interval(rows: _Part) -> tuple[float, float, int]:
    """(lo, hi, clusters): the weighted mean's 95% interval from its cluster-robust SE."""
    y = rows.y
    w = np.ones(len(y)) if rows.weights is None else np.asarray(rows.weights, float)
    codes, k = cluster_codes(rows.labels, len(y))
    mean = float(np.average(y, weights=w))
    u = np.bincount(codes, w * (y - mean) / w.sum(), k)
    se = math.sqrt(k / (k - 1) * float((u * u).sum())) if k > 1 else math.nan
    lo, hi = _around(mean, se, k)
    return lo, hi, k


def _around(value: float, se: float, k: int) -> tuple[float, float]:
    if k < 2 or math.isnan(se):
        return math.nan, math.nan
    half = float(dist.ppf(0.975, k - 1)) * se
    return value - half, value + half


def stamp(data: Data, table: t.Table, rows: pd.DataFrame) -> None:
    """The runs ``rows`` came from as the table's provenance (any run: an experiment's, an
    ``mcp`` or ``proxy`` run's), and the reference-policy caveat when it applies."""
    from limbo.analysis.data import REFERENCE_CAVEAT

    owners = sorted(set(rows["run"].to_numpy().tolist()))
    table.sources = sorted({data.loaded.runs[i].describe() for i in owners if i >= 0})
    if rows["model"].astype(str).str.startswith("policy/").any():
        table.caveat = REFERENCE_CAVEAT


def _note(data: Data, rows: pd.DataFrame) -> str:
    unpriced = int(rows["cost_usd"].isna().sum())
    return (f"Rated episodes (the fault fired, not errored). Each cell: the weighted mean per "
            f"episode and, for a fault mode, (its difference from none [95% interval]); the "
            f"interval is Δ ± t(K − 1)·SE with the cluster-robust SE of two arms that share "
            f"clusters; {data.uncertainty.describe()}. Model calls = model turns. USD over the "
            f"episodes with a known price" + (f" ({unpriced} without)" if unpriced else "")
            + "; wall time measures the machine that ran them, not the agent.")
