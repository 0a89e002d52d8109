"""``limbo compare``: did a change (model, prompt, harness, code) change anything?

Two arms — two runs, or two levels of one factor in one run — are paired on every other cell
field. For each fault family and overall it reports, per metric (duplicate, TS, EOS), the
paired rates, their difference B − A in percentage points (with a cluster-bootstrap interval),
the discordant counts b (A only) and c (B only), the clustered tests (sign-flip p, primary;
Durkalski p) and the unclustered exact McNemar p, each kind with Holm's adjustment over the
families (:mod:`limbo.analysis.pairtable`); and how many episodes did not pair on each side.

Which fields are compared: ``--by FACTOR`` names it; otherwise every cell field whose levels
in A and B are disjoint (two runs that differ only in the model are paired on everything
else); if there is none, the runs are compared cell for cell (a re-run after a code change).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from limbo.analysis import pairtable
from limbo.analysis import table as t
from limbo.analysis.bootstrap import Interval
from limbo.analysis.paired import ClusteredMcNemar
from limbo.analysis.pairing import Pairs, pair
from limbo.analysis.uncertainty import Uncertainty
from limbo.errors import UsageError
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
    """The arms paired on every cell field but the compared ones. Each pair keeps its world
    (``template``, ``instance``) for the clustered tests: the world both share, or A's when the
    template or instance is what is compared."""
    found = pair(arms.a, arms.b, [f for f in CELL_FIELDS if f not in arms.compared])
    for field in ("template", "instance"):
        if field not in found.frame.columns:
            found.frame[field] = arms.a.loc[found.frame["index_a"], field].to_numpy()
    return found


def _families(pairs: Pairs) -> list[str]:
    present = set(pairs.frame["family_a"])
    return [f for f in FAMILY_ORDER if f in present] + sorted(present - set(FAMILY_ORDER))


def metrics_table(arms: Arms, pairs: Pairs, u: Uncertainty) -> t.Table:
    """Per family (then overall) and metric: rates, Δ (with its cluster-bootstrap interval
    under ``--bootstrap``), discordant counts, and both readings of the paired test — the
    sign-flip test over the clusters (primary) and the exact McNemar test — each with Holm over
    the families."""
    table = t.Table(0, f"A = {arms.name_a}, B = {arms.name_b}: paired differences B − A "
                       f"(paired on every cell field but {', '.join(arms.compared) or 'none'})",
                    ["family", "metric", "pairs", "A (%)", "B (%)", "Δ (pp)", "b (A only)",
                     "c (B only)", *pairtable.HEADER], keys=2)
    rated = pairs.rated
    groups = [*((f, rated[rated["family_a"] == f]) for f in _families(pairs)),
              ("overall", rated)]
    for metric, outcome in METRICS.items():
        tests = [pairtable.test(u, rows, outcome, f"compare: {family} {metric}")
                 for family, rows in groups]
        family = [name != "overall" for name, _ in groups]
        for (name, rows), test, ps in zip(groups, tests, pairtable.columns(tests, family),
                                          strict=True):
            interval = pairtable.difference(u, rows, outcome, f"compare: {name} {metric} Δ")
            table.add(*_metric_row(name, metric, outcome, rows, test, interval), *ps)
    table.notes += [f"Δ = B − A over rated pairs, unweighted; {u.describe()}"
                    + (" (Δ's 95% interval)." if u.replicates else "."),
                    pairtable.note(u, "the families, for each metric (not the overall row)")]
    return table


def _metric_row(family: str, metric: str, outcome: str, rows: pd.DataFrame,
                test: ClusteredMcNemar | None, interval: Interval | None) -> tuple[t.Entry, ...]:
    n = len(rows)
    a = rows[f"{outcome}_a"].mean() if n else float("nan")
    b = rows[f"{outcome}_b"].mean() if n else float("nan")
    counts = (test.mcnemar.b, test.mcnemar.c) if test is not None else (0, 0)
    return (t.label(family), t.label(metric), t.count(n), t.number(100 * a, n),
            t.number(100 * b, n), t.points(b - a, n, interval), t.count(counts[0]),
            t.count(counts[1]))


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
