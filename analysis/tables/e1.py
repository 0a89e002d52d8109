"""Tables 3 and 4: E1 by model, and the Shapley decomposition of explained variance."""

from __future__ import annotations

import math

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import E1, LOST_ACK_500_PARTIAL, Data
from limbo.analysis.loader import modes_of
from limbo.analysis.stats import Shapley, shapley_r2
from limbo.analysis.tables.common import excluded, rate_of, weighting_note

TABLE3_HEADER = ["model", "dup: lost ack / 500 / partial", "dup: conn reset",
                 "dup: late commit", "dup: redelivery", "TS: not executed", "EOS: all faults",
                 "episodes"]


def table3(data: Data) -> t.Table:
    """E1 by model: duplicate rates by fault group, task success when the write never ran,
    exactly-once over every faulted episode."""
    table = t.Table(3, "E1 results by model (minimal harness, vanilla, native)", TABLE3_HEADER)
    population = E1.of(data.frame)
    rated = population[population["rated"]]
    if rated.empty:
        table.absent = E1.absent()
        return table
    late, not_run = modes_of(["late commit"]), modes_of(["not executed"])
    faulted = set(rated["fault"]) - {"none"}
    groups = [*rated.groupby("model", sort=True, observed=True), ("all models", rated)]
    for model, rows in groups:
        table.add(t.label(model),
                  rate_of(data, rows, "duplicate", set(LOST_ACK_500_PARTIAL)),
                  rate_of(data, rows, "duplicate", {"conn_reset_post"}),
                  rate_of(data, rows, "duplicate", late),
                  rate_of(data, rows, "duplicate", {"redelivery"}),
                  rate_of(data, rows, "task_success", not_run),
                  rate_of(data, rows, "exactly_once", faulted),
                  t.count(len(rows)))
    table.notes += [weighting_note(data), excluded(population),
                    "E1s episodes (more instances of the batch template) enter the partial-batch "
                    "column when loaded."]
    return table


SHAPLEY_FACTORS = {"contract": "contract_class", "mode": "fault", "model": "model",
                   "harness": "harness"}
COLUMNS = {"pooled": ["read-back resolves", "read-back cannot"],
           "read-back resolves": ["read-back resolves"],
           "read-back cannot": ["read-back cannot"]}


def shapley_of(rows: pd.DataFrame) -> Shapley:
    """Shapley shares of the four factor groups for duplicates, fitted on collapsed cells."""
    factors = list(SHAPLEY_FACTORS.values())
    cells = rows.groupby(factors, observed=True)["duplicate"].agg(["sum", "count"])
    cells = cells.rename(columns={"sum": "y", "count": "n"}).reset_index()
    return shapley_r2(cells, factors)


def _share(result: Shapley, column: str, rows: pd.DataFrame) -> t.Entry:
    if rows[column].nunique() < 2:
        return t.Entry(t.EMPTY)
    value = result.share[column]
    if math.isnan(value):
        return t.Entry(t.EMPTY)
    return t.Entry(f"{max(100 * value, 0.0):.0f}", value)  # no "-0" from rounding noise


def shapley_for(data: Data, block: str, rows: pd.DataFrame, column: str) -> Shapley:
    """The decomposition of one column of Table 4 (computed once; H2 reads it too)."""
    part = rows[rows["fault"].isin(modes_of(COLUMNS[column]))]
    return data.cached(("shapley", block, column), lambda: shapley_of(part))


def _block(data: Data, table: t.Table, name: str, rows: pd.DataFrame) -> None:
    fits = {col: rows[rows["fault"].isin(modes_of(fams))] for col, fams in COLUMNS.items()}
    results = {col: shapley_for(data, name, rows, col) for col in COLUMNS}
    for factor, column in SHAPLEY_FACTORS.items():
        table.add(t.label(name), t.label(f"{factor} share (%)"),
                  *[_share(results[c], column, fits[c]) for c in COLUMNS])
    table.add(t.label(name), t.label("total pseudo-R²"),
              *[t.number(results[c].total_r2, len(fits[c]), 2) for c in COLUMNS])
    table.add(t.label(name), t.label("duplicate rate (%)"),
              *[t.rate(data.rate(fits[c], "duplicate")) for c in COLUMNS])
    table.add(t.label(name), t.label("episodes"), *[t.count(len(fits[c])) for c in COLUMNS])


def shapley_blocks(data: Data) -> dict[str, pd.DataFrame]:
    """E1's episodes and — when several harnesses have vanilla/native episodes — E3's, on
    the tasks every harness present ran (so a harness with more instances weighs no more)."""
    blocks = {"E1": E1.of(data.rated)}
    native = data.rated[(data.rated["condition"] == "vanilla")
                        & (data.rated["contract"] == "native")]
    if native["harness"].nunique() > 1:
        task = ["template", "instance", "focal_write"]
        harnesses = native.groupby(task, observed=True)["harness"]
        blocks["E3"] = native[harnesses.transform("nunique") == native["harness"].nunique()]
    return blocks


def table4(data: Data) -> t.Table:
    """Shapley decomposition of McFadden's R² for duplicates over contract class, mode, model
    and harness: E1, and (when several harnesses are loaded) E3."""
    table = t.Table(4, "Shapley decomposition of explained variance in duplicates",
                    ["experiment", "factor", *COLUMNS], keys=2)
    committed = modes_of(COLUMNS["pooled"])
    blocks = shapley_blocks(data)
    if blocks["E1"][blocks["E1"]["fault"].isin(committed)].empty:
        table.absent = E1.absent()
        return table
    for name, rows in blocks.items():
        _block(data, table, name, rows)
    if "E3" not in blocks:
        table.notes.append("E3 block omitted: only the minimal harness has vanilla/native "
                           "episodes (`limbo run e3` with production harnesses produces it).")
    table.notes += [
        "Shares of McFadden's pseudo-R² (main-effects logit on collapsed cells, Bernoulli "
        "likelihood); contract = the focal write's contract class. '—' = the factor has one "
        "level in these episodes.",
        f"pooled = every fault whose effect commits ({', '.join(sorted(committed))})."]
    return table
