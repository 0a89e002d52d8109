"""Tables 5, 7 and 13: the recovery conditions of E2/E2k, each drawn from the comparison
``conditions`` of its experiment, arms matched on the comparison's pairing factors."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import pairtable, paper
from limbo.analysis import table as t
from limbo.analysis.arms import Matched, within_replicate
from limbo.analysis.data import Data, absent, ordered
from limbo.analysis.pairing import Pairs, pair
from limbo.analysis.tables.common import excluded, none_rated, rate_of, weighting_note

TABLE5_COLUMNS = {"timeout (committed)": ("timeout_post",), "500 (committed)": ("http500_post",),
                  "conn reset (committed)": paper.CONN_RESET,
                  "late commit": paper.LATE_COMMIT, "partial batch": ("partial_batch",),
                  "redelivery": paper.REDELIVERY}
"""Table 5's columns: the paper's committed faults and redelivery, one column each (the late
commits pooled), and LIMBO's connection reset."""
EXPERIMENTS = (("e2", "native"), ("e2k", "keys-everywhere"))


def conditions(data: Data, experiment: str) -> Matched | None:
    """The experiment's conditions matched on the comparison's pairing factors; ``None`` when
    it has no matched cell."""
    found = data.matched(experiment, "conditions")
    return None if none_rated(found) else found


def table5(data: Data) -> t.Table:
    """Duplicate rate by contract variant and condition under committed faults and
    redelivery, models pooled."""
    table = t.Table(5, "Duplicate rate by contract and condition (E2, E2k; models pooled)",
                    ["contract", "condition", *TABLE5_COLUMNS], keys=2)
    data.stamp(table)
    modes = {m for ms in TABLE5_COLUMNS.values() for m in ms}
    for experiment, contract in EXPERIMENTS:
        matched = conditions(data, experiment)
        if matched is None:
            continue
        for condition, rows in matched.arms.items():
            rows = rows[rows["fault"].isin(modes).to_numpy()]
            rated = rows[rows["rated"].to_numpy()]
            table.add(t.label(contract), t.label(condition),
                      *[rate_of(data, rated, "duplicate", set(m)) for m in TABLE5_COLUMNS.values()])
        table.notes += [matched.note(), excluded(_faults(matched.rows, modes))]
    if not table.rows:
        table.absent = absent("e2", "e2k")
        return table
    table.notes.insert(0, weighting_note(data, table))
    return table


def _faults(rows: pd.DataFrame, modes: set[str]) -> pd.DataFrame:
    return rows[rows["fault"].isin(modes).to_numpy()]


METRICS = {"EOS": "exactly_once", "dup": "duplicate", "TS": "task_success"}


def table7(data: Data) -> t.Table:
    """EOS, duplicate rate and task success by model and condition over faulted episodes,
    with mean cost and tool calls per condition."""
    matched = conditions(data, "e2")
    names = list(matched.arms) if matched else []
    table = t.Table(7, "Recovery conditions (E2): rates over faulted episodes",
                    ["metric", "contract", "model", *names], keys=3)
    data.stamp(table)
    if matched is None:
        table.absent = absent("e2")
        return table
    arms = {c: rows[(rows["fault"] != "none").to_numpy()] for c, rows in matched.arms.items()}
    rated = {c: rows[rows["rated"].to_numpy()] for c, rows in arms.items()}
    models = sorted(set().union(*(set(r["model"].astype(str)) for r in rated.values())))
    for metric, outcome in METRICS.items():
        for model in models:
            table.add(t.label(metric), t.label("native"), t.label(model),
                      *[t.rate(data.rate(rated[c][rated[c]["model"] == model], outcome),
                               counts=False) for c in names])
    for name, column, digits in (("mean cost (USD)", "cost_usd", 4),
                                 ("mean tool calls", "tool_calls", 1)):
        table.add(t.label(name), t.label("native"), t.label("all models"),
                  *[_mean(data, rated[c], column, digits) for c in names])
    table.notes += [weighting_note(data, table) + " Counts and intervals are in the CSV.",
                    matched.note(), excluded(pd.concat(list(arms.values())))]
    return table


def _mean(data: Data, rows: pd.DataFrame, column: str, digits: int) -> t.Entry:
    if rows.empty:
        return t.Entry(t.EMPTY)
    return t.number(data.mean(rows, column), len(rows), digits)


def paired_arms(matched: Matched, a: str, b: str) -> Pairs:
    """Episodes of arms ``a`` and ``b`` paired one to one on the comparison's pairing factors,
    within a replicate (two seeds of one cell are two pairs, never an ambiguous key)."""
    return pair(matched[a], matched[b], within_replicate(matched.comparison.pair_on))


def _guard_rows(data: Data) -> list[tuple[str, str, pd.DataFrame]]:
    found = []
    for experiment, contract in EXPERIMENTS:
        matched = conditions(data, experiment)
        if matched is None or "guard" not in matched.arms:
            continue
        faulted = Matched(matched.comparison, {c: r[(r["fault"] != "none").to_numpy()]
                                               for c, r in matched.arms.items()},
                          matched.cells, matched.unmatched)
        for other in ordered(set(matched.arms) - {"guard"}):
            rated = paired_arms(faulted, "guard", other).rated
            if len(rated):
                found.append((contract, other, rated))
    return found


def table13(data: Data) -> t.Table:
    """The guard against each other condition on exactly-once success: paired episodes, the
    sign-flip test over worlds (primary) and the exact McNemar test, each with Holm over the
    paper's six comparisons."""
    table = t.Table(13, "Guard vs each other condition on EOS (E2; paired, Holm-adjusted)",
                    ["contract", "guard vs", "EOS guard (%)", "EOS other (%)", "EOS gain (pp)",
                     "paired episodes", *pairtable.HEADER], keys=2)
    data.stamp(table)
    found = _guard_rows(data)
    if not found:
        table.absent = absent("e2", "e2k")
        return table
    u = data.uncertainty
    tests = [pairtable.test(u, r, "exactly_once", f"table 13: {c} guard vs {o}")
             for c, o, r in found]
    family = [contract == "native" and other in paper.TABLE13_FAMILY
              for contract, other, _ in found]
    for (contract, other, rated), inside, ps in zip(found, family,
                                                    pairtable.columns(tests, family),
                                                    strict=True):
        guard, rest = rated["exactly_once_a"].mean(), rated["exactly_once_b"].mean()
        gain = rated["exactly_once_a"].to_numpy(float) - rated["exactly_once_b"].to_numpy(float)
        interval = u.mean(gain, rated, None, f"table 13: {contract} guard vs {other} gain")
        table.add(t.label(contract), t.label(other if inside else f"{other} †"),
                  t.number(100 * guard, len(rated)), t.number(100 * rest, len(rated)),
                  t.points(guard - rest, len(rated), interval), t.count(len(rated)), *ps)
    table.notes += [
        "Pairs share every pairing factor of the comparison (model, harness, contract, fault, "
        "template, instance, focal write); faulted episodes, both rated. Unweighted paired "
        f"rates; {u.describe()}" + (" (the gain's interval)." if u.replicates else "."),
        pairtable.note(u, f"the paper's family — guard vs {', '.join(paper.TABLE13_FAMILY)} "
                          f"under the native contract ({sum(family)} present)",
                       "; † not in that family: p unadjusted")]
    return table
