"""Helpers every table uses: rows of rates by a factor, and the note on excluded episodes."""

from __future__ import annotations

import pandas as pd

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


def weighting_note(data: Data) -> str:
    scheme = {"template": "equal weight per task template", "instance": "equal weight per "
              "task instance", "none": "every episode weighted equally"}[data.weighting]
    return (f"Rates in %, [95% Wilson interval on Kish effective n], raw counts; {scheme} "
            f"within each cell. Conditional on the fault having fired.")
