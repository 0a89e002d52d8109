"""Pairing episodes of two arms on every other cell factor (Tables 10 and 13, ``limbo compare``).

Two episodes pair when they agree on the key (every cell field except the compared ones).
A key that occurs twice within one arm cannot pair unambiguously: those episodes are set
aside and counted, never matched arbitrarily. Episodes without a partner are counted per arm.
A pair is *rated* when both episodes are (the fault fired, and neither ended in an
infrastructure or provider error); only rated pairs enter a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd


@dataclass
class Pairs:
    """Matched episodes side by side (columns suffixed ``_a`` / ``_b``) and what did not pair."""

    frame: pd.DataFrame
    key: list[str]
    unpaired_a: pd.DataFrame
    unpaired_b: pd.DataFrame
    ambiguous: int
    """Episodes set aside because their key occurs more than once in their arm."""

    @property
    def rated(self) -> pd.DataFrame:
        return self.frame[self.frame["rated_a"] & self.frame["rated_b"]]


def _unique(frame: pd.DataFrame, key: list[str]) -> tuple[pd.DataFrame, int]:
    dup = frame.duplicated(key, keep=False)
    return frame[~dup], int(dup.sum())


CARRIED = ("rated", "family", "duplicate", "task_success", "exactly_once")
"""The columns a pair carries from each side (suffixed ``_a`` / ``_b``)."""


def pair(a: pd.DataFrame, b: pd.DataFrame, key: Sequence[str]) -> Pairs:
    """Match ``a`` and ``b`` on ``key``."""
    key = list(key)
    a, amb_a = _unique(a, key)
    b, amb_b = _unique(b, key)
    columns = [*key, *CARRIED]
    merged = a[columns].reset_index().merge(b[columns].reset_index(), on=key, how="outer",
                                            suffixes=("_a", "_b"), indicator=True)
    both = merged[merged["_merge"] == "both"].drop(columns="_merge")
    left = merged[merged["_merge"] == "left_only"]
    right = merged[merged["_merge"] == "right_only"]
    unpaired_a = a.loc[left["index_a"].astype(int)] if len(left) else a.iloc[:0]
    unpaired_b = b.loc[right["index_b"].astype(int)] if len(right) else b.iloc[:0]
    for side in ("a", "b"):
        both[f"rated_{side}"] = both[f"rated_{side}"].astype(bool)
    return Pairs(both, key, unpaired_a, unpaired_b, amb_a + amb_b)
