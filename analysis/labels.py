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
    """Each row's cluster as 0…K−1 in order of first appearance, and K. ``rows``, if given,
    is how many rows the labels must cover."""
    codes, uniques = pd.factorize(np.asarray(labels, dtype=object))
    if rows is not None and len(codes) != rows:
        raise ValueError(f"{len(codes)} cluster labels for {rows} rows")
    if (codes < 0).any():
        raise ValueError(f"{int((codes < 0).sum())} row(s) without a cluster label (None or NaN)")
    return codes.astype(np.intp), len(uniques)
