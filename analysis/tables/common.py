"""Helpers every table uses: rows of rates by a factor, and the note on excluded episodes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from limbo.analysis import paper
from limbo.analysis import table as t
from limbo.analysis.arms import Matched
from limbo.analysis.data import Data


def excluded(rows: pd.DataFrame) -> str:
    """The note saying which episodes of a population are not in its rates, and why."""
    errors = int(rows["error"].sum())
    unfired = int((~rows["fault_fired"] & ~rows["error"]).sum())
    parts = []
    if errors:
        parts.append(f"{errors} errored (infra_error, model_error or timeout)")
    if unfired:
        parts.append(f"{unfired} never reached the focal write (fault not fired)")
    if not parts:
        return f"{len(rows)} episodes, all rated."
    return f"{len(rows)} episodes; excluded from rates: " + "; ".join(parts) + "."


def none_rated(matched: Matched | None) -> bool:
    """Whether a comparison has no rated episode to show (none matched, or every matched
    episode errored or never reached its fault)."""
    return matched is None or not matched.cells or not bool(matched.rows["rated"].any())


def rate_of(data: Data, rows: pd.DataFrame, outcome: str, modes: set[str] | None = None,
            counts: bool = True) -> t.Entry:
    """The rate of ``outcome`` over the rated ``rows`` whose fault is in ``modes``."""
    if modes is not None:
        rows = rows[rows["fault"].isin(modes)]
    return t.rate(data.rate(rows, outcome), counts)


def weighting_note(data: Data, table: t.Table) -> str:
    """How the table's rates are weighted and how sure they are: the unit of replication, and
    the range of n, clusters and effective n over its cells (each cell's are in the CSV)."""
    scheme = {"template": "equal weight per task template", "instance": "equal weight per "
              "task instance", "none": "every episode weighted equally"}[data.weighting]
    interval = ("Wilson interval on Kish's n" if data.uncertainty.cluster == "none" else
                "Wilson interval with the design effect at each candidate rate")
    return (f"Rates in %, [95% {interval}], raw "
            f"counts; {scheme} within each cell; {data.uncertainty.describe()}"
            f"{' (intervals in the CSV: boot_lo, boot_hi)' if data.uncertainty.replicates else ''}."
            f"{spread(table, data.uncertainty.noun)} Conditional on the fault having fired.")


def spread(table: t.Table, clusters: str) -> str:
    """" Cells: n 12–515 in 3–48 worlds, effective n 2.1–120.5 (…in the CSV)." — or "" when
    the table has no rate yet."""
    cells = [e for row in table.rows for e in row if not math.isnan(e.clusters)]
    if not cells:
        return ""

    def span(values: list[float], digits: int) -> str:
        low, high = min(values), max(values)
        return f"{low:.{digits}f}" if low == high else f"{low:.{digits}f}–{high:.{digits}f}"

    units = span([e.clusters for e in cells], 0)
    unit = clusters.removesuffix("s") if units == "1" else clusters  # "in 1 world"
    return (f" Cells: n {span([e.denominator for e in cells], 0)} in {units} {unit}, effective n "
            f"{span([e.n_eff for e in cells], 1)}; each cell's n, n_eff, clusters and design "
            f"effect are in the CSV.")


def replicates_note(data: Data, table: t.Table) -> str:
    """How many replicates (seeds of a world) each cell of ``table`` has: from the episodes
    behind each entry, or, for a table of tests, from the episodes of its experiments."""
    seeds = data.seeds
    counts = [seeds.count(e.behind.rows) for row in table.rows for e in row
              if e.behind is not None and not e.empty]
    if not counts:
        inside = np.zeros(len(data.frame), dtype=bool)
        for name in paper.TABLE_EXPERIMENTS.get(table.number, ()):
            inside |= data.member(name)
        counts = [seeds.count(data.frame.index[inside])]
    return seeds.note(counts)
