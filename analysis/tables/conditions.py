"""Tables 5, 7 and 13: the recovery conditions of E2/E2k."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import E2, Data, ordered
from limbo.analysis.loader import modes_of
from limbo.analysis.pairing import Pairs, pair
from limbo.analysis.stats import discordant, holm, mcnemar_exact
from limbo.analysis.tables.common import excluded, rate_of, weighting_note
from limbo.records import CELL_FIELDS

CONTRACTS = ("native", "keys-everywhere")


def table5_columns() -> dict[str, set[str]]:
    return {"timeout (committed)": {"timeout_post"}, "500 (committed)": {"http500_post"},
            "conn reset (committed)": {"conn_reset_post"},
            "late commit": modes_of(["late commit"]), "partial batch": {"partial_batch"},
            "redelivery": {"redelivery"}}


def table5(data: Data) -> t.Table:
    """Duplicate rate by contract variant and condition under committed faults and
    redelivery, models pooled."""
    columns = table5_columns()
    table = t.Table(5, "Duplicate rate by contract and condition (E2, E2k; models pooled)",
                    ["contract", "condition", *columns], keys=2)
    modes = set().union(*columns.values())
    population = E2.of(data.frame)
    population = population[population["fault"].isin(modes)]
    rated = population[population["rated"]]
    if rated.empty:
        table.absent = E2.absent()
        return table
    for contract in ordered(rated["contract"].unique(), CONTRACTS):
        block = rated[rated["contract"] == contract]
        for condition in ordered(block["condition"].unique()):
            rows = block[block["condition"] == condition]
            table.add(t.label(contract), t.label(condition),
                      *[rate_of(data, rows, "duplicate", m) for m in columns.values()])
    table.notes += [weighting_note(data), excluded(population)]
    return table


METRICS = {"EOS": "exactly_once", "dup": "duplicate", "TS": "task_success"}


def table7(data: Data) -> t.Table:
    """EOS, duplicate rate and task success by model and condition over faulted episodes,
    with mean cost and tool calls per condition."""
    population = E2.of(data.frame)
    population = population[population["fault"] != "none"]
    rated = population[population["rated"]]
    conditions = ordered(rated["condition"].unique())
    table = t.Table(7, "Recovery conditions (E2): rates over faulted episodes",
                    ["metric", "contract", "model", *conditions], keys=3)
    if rated.empty:
        table.absent = E2.absent()
        return table
    contracts = ordered(rated["contract"].unique(), CONTRACTS)
    for metric, outcome in METRICS.items():
        for contract in contracts:
            block = rated[rated["contract"] == contract]
            for model, rows in block.groupby("model", sort=True, observed=True):
                by = dict(tuple(rows.groupby("condition", observed=True)))
                table.add(t.label(metric), t.label(contract), t.label(model),
                          *[t.rate(data.rate(by.get(c, rows.iloc[:0]), outcome), counts=False)
                            for c in conditions])
    for contract in contracts:
        block = rated[rated["contract"] == contract]
        by = dict(tuple(block.groupby("condition", observed=True)))
        for name, column, digits in (("mean cost (USD)", "cost_usd", 4),
                                     ("mean tool calls", "tool_calls", 1)):
            table.add(t.label(name), t.label(contract), t.label("all models"),
                      *[_mean(data, by.get(c), column, digits) for c in conditions])
    table.notes += [weighting_note(data) + " Counts and intervals are in the CSV.",
                    excluded(population)]
    return table


def _mean(data: Data, rows: pd.DataFrame | None, column: str, digits: int) -> t.Entry:
    if rows is None or rows.empty:
        return t.Entry(t.EMPTY)
    return t.number(data.mean(rows, column), len(rows), digits)


def paired_condition(rows: pd.DataFrame, a: str, b: str) -> Pairs:
    """Episodes of condition ``a`` and ``b`` paired on every other cell field."""
    key = [f for f in CELL_FIELDS if f != "condition"]
    return pair(rows[rows["condition"] == a], rows[rows["condition"] == b], key)


def table13(data: Data) -> t.Table:
    """The guard against each other condition on exactly-once success: paired episodes,
    exact McNemar, Holm over the table."""
    table = t.Table(13, "Guard vs each other condition on EOS (E2; paired, Holm-adjusted)",
                    ["contract", "guard vs", "EOS guard (%)", "EOS other (%)", "EOS gain (pp)",
                     "paired episodes", "McNemar p", "Holm p"], keys=2)
    faulted = E2.of(data.frame)
    faulted = faulted[faulted["fault"] != "none"]
    found = []
    for contract in ordered(faulted["contract"].unique(), CONTRACTS):
        block = faulted[faulted["contract"] == contract]
        for other in ordered(set(block["condition"]) - {"guard"}):
            rated = paired_condition(block, "guard", other).rated
            if len(rated):
                found.append((contract, other, rated))
    if not found:
        table.absent = ("no episodes of the guard paired with another condition on the same "
                        "cells; `limbo run e2` produces them")
        return table
    tests = [mcnemar_exact(*discordant(r["exactly_once_a"], r["exactly_once_b"]))
             for _, _, r in found]
    adjusted = holm([m.pvalue for m in tests])
    for (contract, other, rated), test, p_holm in zip(found, tests, adjusted, strict=True):
        guard, rest = rated["exactly_once_a"].mean(), rated["exactly_once_b"].mean()
        table.add(t.label(contract), t.label(other), t.number(100 * guard, len(rated)),
                  t.number(100 * rest, len(rated)), t.points(guard - rest, len(rated)),
                  t.count(len(rated)), t.pvalue(test.pvalue), t.pvalue(float(p_holm)))
    table.notes.append("Pairs share every cell field but the condition (model, contract, fault, "
                       "template, instance, focal write, seed); both episodes rated. Unweighted "
                       "paired rates. Holm over every row of this table.")
    return table
