"""Paired tests as Tables 10 and 13 and ``limbo compare`` print them: the clustered test first,
the paper's test beside it, each with Holm's adjustment over the same family.

Each row of such a table compares paired outcomes A and B (:mod:`limbo.analysis.pairing`).
Its columns: the clusters the pairs fall in; the sign-flip p over the clusters' net
discordance (the primary p) and its Holm adjustment; Durkalski's clustered McNemar p; and the
exact McNemar p counting every pair as independent, labelled unclustered, with a Holm
adjustment of its own (``reference/stats.md`` §8: the two kinds of p are two readings of one
family, never pooled into one). ``--cluster none`` makes every pair its own cluster, where the
sign-flip p is the exact McNemar p.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.bootstrap import Interval
from limbo.analysis.paired import ClusteredMcNemar, holm_each
from limbo.analysis.uncertainty import Uncertainty

HEADER = ["clusters", "sign-flip p", "Holm p", "Durkalski p", "McNemar p (unclustered)",
          "Holm p (unclustered)"]


def test(u: Uncertainty, rows: pd.DataFrame, outcome: str, what: str) -> ClusteredMcNemar | None:
    """Both readings of ``outcome`` under A (``<outcome>_a``) and B (``_b``) over the pairs
    ``rows`` (which hold each pair's template and instance); None without pairs."""
    if rows.empty:
        return None
    return u.paired(rows[f"{outcome}_a"], rows[f"{outcome}_b"], rows, what)


def difference(u: Uncertainty, rows: pd.DataFrame, outcome: str, what: str) -> Interval | None:
    """The cluster-bootstrap interval of the paired difference B − A (None without
    ``--bootstrap`` or pairs)."""
    if rows.empty:
        return None
    diff = rows[f"{outcome}_b"].to_numpy(float) - rows[f"{outcome}_a"].to_numpy(float)
    return u.mean(diff, rows, None, what)


def columns(tests: Sequence[ClusteredMcNemar | None],
            family: Sequence[bool] | None = None) -> list[list[t.Entry]]:
    """The :data:`HEADER` entries of each test; Holm over the tests in ``family`` (default:
    all), each kind of p apart. A test outside the family, or None (no pairs), has no Holm p."""
    inside = list(family) if family is not None else [True] * len(tests)
    flips, plain, bounds = holm_each([x if keep else None
                                      for x, keep in zip(tests, inside, strict=True)])
    rows = []
    for x, keep, flip, mcnemar, bound in zip(tests, inside, flips, plain, bounds, strict=True):
        if x is None:
            rows.append([t.Entry(t.EMPTY)] * len(HEADER))
            continue
        rows.append([t.count(x.worlds), t.pvalue(x.sign_flip.pvalue, bound=x.sign_flip.bound),
                     t.pvalue(float(flip), bound=bool(bound)) if keep else t.Entry(t.EMPTY),
                     t.pvalue(x.p_durkalski, model=True), t.pvalue(x.mcnemar.pvalue),
                     t.pvalue(float(mcnemar)) if keep else t.Entry(t.EMPTY)])
    return rows


UNITS = {"world": ("worlds (template, instance)", "world"),
         "template": ("task templates", "template"),
         "none": ("pairs, each its own cluster (--cluster none: the sign-flip p is then the "
                  "exact McNemar p)", "pair")}


def note(u: Uncertainty, family: str, outside: str = "") -> str:
    """What the p-value columns are, for the table's notes: Holm over ``family``; ``outside``
    says what happens to the rows outside it."""
    clusters, one = UNITS[u.cluster]
    return (f"Clusters: the {clusters} the pairs fall in. Sign-flip p (primary): permutation "
            f"of the signs of each {one}'s net discordance d = b − c, from its exact "
            f"distribution (convolved {one} by {one}; 100,000 seeded Monte Carlo flips past "
            f"1,000 discordant clusters or 20 million steps, their floor shown as a bound, "
            f"< 1e-05); Durkalski p: χ²₁ of (Σd)² / Σd², < 1e-6 below that. McNemar p "
            f"(unclustered): the exact test counting every pair as independent, as the paper "
            f"does, for comparison. Holm over {family}, to "
            f"the sign-flip and the McNemar p-values separately{outside}.")
