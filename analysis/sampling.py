"""How a run sampled beyond one episode per cell: Table 14 (repeats: pass^k and consistent
outcomes, ``limbo run --repeats K``) and Table 16 (sampling until precise, ``--precision``).

Both read any loaded run. pass^k and consistency are computed by the same code as ``limbo
run``'s summary (:mod:`limbo.log.replicates`), so the two never disagree; Table 16 shows each
arm as its run recorded it in the manifest — the stopping rule, where the arm stopped and its
confidence-sequence interval, which for such an arm is the interval to quote: a fixed-n
interval recomputed on the worlds a sequential rule chose does not keep its coverage.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import Data
from limbo.analysis.fault_cost import stamp
from limbo.base.intervals import MeanInterval
from limbo.log.records import CELL_FIELDS
from limbo.log.replicates import CONSISTENT_ESTIMATOR, INTERVAL, PASS_K_ESTIMATOR, Replicates

KEYS = [name for name in CELL_FIELDS if name != "replicate"]


def replicates_of(rows: pd.DataFrame) -> Replicates:
    """The rows' outcomes grouped by cell, replicates together (as :mod:`limbo.log.replicates`
    groups records)."""
    found = Replicates()
    columns = [*KEYS, "fault_fired", "termination", "duplicate", "task_success", "exactly_once"]
    for values in rows[columns].itertuples(index=False, name=None):
        found.add(dict(zip(KEYS, values[:len(KEYS)], strict=True)),
                  dict(zip(columns[len(KEYS):], values[len(KEYS):], strict=True)))
    return found


def _entry(found: MeanInterval) -> t.Entry:
    if not found.units:
        return t.Entry(t.EMPTY, denominator=0)
    shown = found.shown().replace("%", "")
    return t.Entry(shown, found.estimate, denominator=found.units, n_eff=found.n_eff,
                   lo=found.lo, hi=found.hi, clusters=found.clusters)


def table14(data: Data) -> t.Table:
    """Per model (and all): cells with repeats, pass^k for k = 1 .. K (at most five columns)
    and the share of cells with consistent outcomes."""
    repeated = data.frame[_repeated(data.frame)]
    found = replicates_of(repeated)
    most = found.most
    ks = sorted({*range(1, min(most, 4) + 1), most}) if most >= 2 else [1, 2]
    table = t.Table(14, "Repeats: pass^k of exactly-once and consistent outcomes per cell",
                    ["model", "cells", *(f"pass^{k} (%)" for k in ks), "consistent (%)"])
    if most < 2:
        table.absent = ("No data — produced by `limbo run GRID --repeats K` (K ≥ 2 samples of "
                        "every cell, each with its own model-sampling seed)")
        return table
    models = found.models()
    for model in [*models, None] if len(models) > 1 else [None]:
        top = found.pass_k(1, model)
        table.add(t.label(model or "all"), t.count(top.units),
                  *(_entry(found.pass_k(k, model)) for k in ks), _entry(found.consistent(model)))
    stamp(data, table, repeated)
    table.notes.append(f"pass^k: {PASS_K_ESTIMATOR}, over the cells with at least k rated "
                       f"replicates (pass = exactly-once). Consistent: {CONSISTENT_ESTIMATOR}, "
                       f"over the cells with at least two. Intervals: {INTERVAL}. Cells with "
                       f"up to {most} rated replicates; worlds in the CSV's clusters column.")
    return table


def _repeated(frame: pd.DataFrame) -> pd.Series:
    """Rows of every cell that has a replicate beyond 0 (its replicate 0 included)."""
    extra = frame["replicate"].astype(int) > 0
    if not extra.any():
        return extra
    keys = frame[KEYS].astype(str).agg("\x1f".join, axis=1)
    return keys.isin(set(keys[extra]))


def table16(data: Data) -> t.Table:
    """One row per arm of every loaded ``--precision`` run, as its manifest recorded it."""
    table = t.Table(16, "Sampled until precise: where each arm stopped, and its confidence "
                        "sequence", ["run", "arm", "metric", "estimate (%) [95% CS]", "worlds",
                                     "episodes", "status"], keys=2)
    runs = [(run, run.manifest["precision"]) for run in data.loaded.runs
            if isinstance(run.manifest.get("precision"), dict)]
    if not runs:
        table.absent = "No data — produced by `limbo run GRID --precision METRIC:HALFWIDTH`"
        return table
    for run, facts in runs:
        for arm in facts.get("arms") or []:
            table.add(t.label(run.describe().split(" (")[0]), t.label(_arm(arm)),
                      t.label(f"{facts['metric']} ±{facts['halfwidth']:g}"), _cs(arm),
                      t.label(f"{arm['worlds']} of {arm['of_worlds']}"),
                      t.label(f"{arm['episodes']} of {arm['of_episodes']}"),
                      t.label(arm["status"]))
        table.notes.append(f"{facts['spec']}: {facts['rule']}. Estimand: {facts['estimand']}. "
                           f"Worlds in the order of {facts['order']}; "
                           f"{facts['episodes_run']} episodes recorded of the full grid's "
                           f"{facts['grid_episodes']}.")
    table.sources = sorted({run.describe() for run, _ in runs})
    return table


def _arm(arm: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in arm["arm"].items()) or "all cells"


def _cs(arm: dict[str, Any]) -> t.Entry:
    value = arm.get("estimate")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return t.Entry(t.EMPTY)
    return t.Entry(f"{100 * value:.1f} [{100 * arm['lo']:.1f}, {100 * arm['hi']:.1f}]",
                   float(value), denominator=arm["observations"], lo=arm["lo"], hi=arm["hi"],
                   clusters=arm["observations"])
