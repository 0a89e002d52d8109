"""``limbo compare``: did a change (model, prompt, harness, code) change anything?

Two arms — two runs, or two levels of one factor in one run — are paired on every other cell
field. For each fault family and overall it reports, per metric (duplicate, TS, EOS), the
paired rates, their difference B − A in percentage points, the discordant counts b (A only)
and c (B only), the exact McNemar p, and Holm's adjustment over the families; and how many
episodes did not pair on each side.

Which fields are compared: ``--by FACTOR`` names it; otherwise every cell field whose levels
in A and B are disjoint (two runs that differ only in the model are paired on everything
else); if there is none, the runs are compared cell for cell (a re-run after a code change).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.pairing import Pairs, pair
from limbo.analysis.stats import McNemar, discordant, holm, mcnemar_exact
from limbo.base.errors import UsageError
from limbo.log.records import CELL_FIELDS

METRICS = {"dup": "duplicate", "TS": "task_success", "EOS": "exactly_once"}
FAMILY_ORDER = ("not executed", "read-back resolves", "late commit", "read-back cannot",
                "phantom", "none")


@dataclass
class Arms:
    """The two sides and their names."""

    a: pd.DataFrame
    b: pd.DataFrame
    name_a: str
    name_b: str
    compared: list[str]


def disjoint_fields(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Cell fields whose levels never coincide between the two arms."""
    return [f for f in CELL_FIELDS if not set(a[f].astype(str)) & set(b[f].astype(str))]


def _factor(by: str) -> tuple[str, list[str]]:
    name, _, levels = by.partition("=")
    if name not in CELL_FIELDS:
        raise UsageError(f"--by {name!r} is not a cell field; choose from {', '.join(CELL_FIELDS)}")
    return name, [v.strip() for v in levels.split(",") if v.strip()] if levels else []


def two_runs(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str], by: str | None) -> Arms:
    """Arms from two runs; the compared fields are ``by`` or the disjoint ones."""
    if by is None:
        return Arms(a, b, *names, disjoint_fields(a, b))
    factor, levels = _factor(by)
    if levels:
        raise UsageError(f"--by {by}: with two runs name only the factor (levels pick the two "
                         f"arms of one run)")
    return Arms(a, b, *names, [factor])


def one_run(frame: pd.DataFrame, by: str | None) -> Arms:
    """Arms from two levels of one factor in one run."""
    if by is None:
        raise UsageError("with one run, name the factor to compare: --by FACTOR[=A,B]")
    factor, levels = _factor(by)
    present = sorted(set(frame[factor].astype(str)))
    if not levels:
        if len(present) != 2:
            raise UsageError(f"--by {factor}: the run has {len(present)} levels "
                             f"({', '.join(present)}); name two: --by {factor}=A,B")
        levels = present
    missing = [v for v in levels if v not in present]
    if len(levels) != 2 or missing:
        raise UsageError(f"--by {by}: name two levels of {factor} present in the run "
                         f"({', '.join(present)})")
    sides = [frame[frame[factor].astype(str) == v] for v in levels]
    return Arms(sides[0], sides[1], f"{factor}={levels[0]}", f"{factor}={levels[1]}", [factor])


def paired(arms: Arms) -> Pairs:
    return pair(arms.a, arms.b, [f for f in CELL_FIELDS if f not in arms.compared])


def _families(pairs: Pairs) -> list[str]:
    present = set(pairs.frame["family_a"])
    return [f for f in FAMILY_ORDER if f in present] + sorted(present - set(FAMILY_ORDER))


def metrics_table(arms: Arms, pairs: Pairs) -> t.Table:
    """Per family (then overall) and metric: rates, Δ, discordant counts, McNemar and Holm."""
    table = t.Table(0, f"A = {arms.name_a}, B = {arms.name_b}: paired differences B − A "
                       f"(paired on every cell field but {', '.join(arms.compared) or 'none'})",
                    ["family", "metric", "pairs", "A (%)", "B (%)", "Δ (pp)", "b (A only)",
                     "c (B only)", "McNemar p", "Holm p"], keys=2)
    rated = pairs.rated
    groups = [(f, rated[rated["family_a"] == f]) for f in _families(pairs)]
    for metric, outcome in METRICS.items():
        tests = [mcnemar_exact(*discordant(r[f"{outcome}_a"], r[f"{outcome}_b"]))
                 for _, r in groups]
        adjusted = holm([m.pvalue if len(r) else float("nan") for m, (_, r) in
                         zip(tests, groups, strict=True)])
        overall = mcnemar_exact(*discordant(rated[f"{outcome}_a"], rated[f"{outcome}_b"]))
        for (family, rows), test, p_holm in [*zip(groups, tests, adjusted, strict=True),
                                             (("overall", rated), overall, float("nan"))]:
            table.add(*_metric_row(family, metric, outcome, rows, test, p_holm))
    return table


def _metric_row(family: str, metric: str, outcome: str, rows: pd.DataFrame, test: McNemar,
                p_holm: float) -> tuple[t.Entry, ...]:
    n = len(rows)
    a = rows[f"{outcome}_a"].mean() if n else float("nan")
    b = rows[f"{outcome}_b"].mean() if n else float("nan")
    return (t.label(family), t.label(metric), t.count(n), t.number(100 * a, n),
            t.number(100 * b, n), t.points(b - a, n), t.count(test.b), t.count(test.c),
            t.pvalue(test.pvalue if n else float("nan")), t.pvalue(p_holm))


def _of(frame: pd.DataFrame, column: str, family: str) -> pd.DataFrame:
    return frame if family == "overall" else frame[frame[column] == family]


def pairing_table(arms: Arms, pairs: Pairs) -> t.Table:
    """Per family: rated pairs, pairs with an unrated side, and unpaired episodes per arm."""
    table = t.Table(0, "pairing", ["family", "rated pairs", "pairs with an unrated episode",
                                   f"unpaired in A ({arms.name_a})",
                                   f"unpaired in B ({arms.name_b})"])
    families = sorted(set(pairs.frame["family_a"]) | set(pairs.unpaired_a["family"])
                      | set(pairs.unpaired_b["family"]),
                      key=lambda f: (FAMILY_ORDER.index(f) if f in FAMILY_ORDER else 99, f))
    for family in [*families, "overall"]:
        rows = _of(pairs.frame, "family_a", family)
        rated = int((rows["rated_a"] & rows["rated_b"]).sum())
        table.add(t.label(family), t.count(rated), t.count(len(rows) - rated),
                  t.count(len(_of(pairs.unpaired_a, "family", family))),
                  t.count(len(_of(pairs.unpaired_b, "family", family))))
    if pairs.ambiguous:
        table.notes.append(f"{pairs.ambiguous} episodes set aside: their pairing key repeats "
                           f"within an arm (name the differing field with --by).")
    return table
