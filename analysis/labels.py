"""Cluster labels as integer codes, the one place every clustered statistic gets them from.

A label may be anything hashable (a world id string, a template name, a number). A row without
one (None or NaN) is refused rather than guessed at: grouping the unlabelled rows together
would invent a cluster, and dropping them would lose episodes without a word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

Array = np.ndarray


def cluster_codes(labels: Sequence[Any] | Array, rows: int | None = None) -> tuple[Array, int]:
    """Each row's cluster as 0…K−1 in sorted order of the labels (as text), and K. The order
    is the labels', not the rows': a bootstrap or a Monte Carlo draw is then the same for the
    same cell however its rows were loaded. ``rows``, if given, is how many rows the labels
    must cover."""
    values = np.asarray(labels)
    if rows is not None and len(values) != rows:
        raise ValueError(f"{len(values)} cluster labels for {rows} rows")
    if values.dtype.kind != "U":  # text already has no missing label and needs no conversion
        values = np.asarray(labels, dtype=object)
        missing = pd.isna(values)
        if missing.any():
            raise ValueError(f"{int(missing.sum())} row(s) without a cluster label (None or NaN)")
        values = values.astype(str)
    uniques, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.intp).reshape(-1), len(uniques)
