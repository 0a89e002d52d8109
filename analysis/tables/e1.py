"""Tables 3 and 4: E1 by model, and the Shapley decomposition of explained variance."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import paper
from limbo.analysis import table as t
from limbo.analysis.bootstrap import Interval, shapley_statistic
from limbo.analysis.data import Data, absent
from limbo.analysis.stats import Shapley, shapley_r2
from limbo.analysis.tables.common import excluded, rate_of, weighting_note

TABLE3_HEADER = ["model", "dup: lost ack / 500 / partial", "dup: conn reset",
                 "dup: late commit", "dup: redelivery", "TS: not executed", "EOS: all faults",
                 "episodes"]


def e1_with_batch_supplement(data: Data) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(E1's rated episodes, and those of E1 ∪ E1s under partial batch): E1s enters only the
    partial-batch figures (:data:`limbo.analysis.paper.E1S_ONLY_IN`)."""
    e1 = data.experiment("e1")
    batch = pd.concat([e1, data.experiment("e1s")])
    batch = batch[~batch.index.duplicated()]
    batch = batch[batch["fault"].isin(paper.E1S_ONLY_IN).to_numpy() & batch["rated"].to_numpy()]
    return e1[e1["rated"].to_numpy()], batch


def table3(data: Data) -> t.Table:
    """E1 by model: duplicate rates by fault group, task success when the write never ran,
    exactly-once over every faulted episode."""
    table = t.Table(3, "E1 results by model (minimal harness, vanilla, native)", TABLE3_HEADER)
    data.stamp(table)
    rated, batch = e1_with_batch_supplement(data)
    if rated.empty and batch.empty:
        table.absent = absent("e1")
        return table
    models = sorted(set(rated["model"].astype(str)) | set(batch["model"].astype(str)))
    for model in [*models, "all models"]:
        rows = rated if model == "all models" else rated[rated["model"] == model]
        both = batch if model == "all models" else batch[batch["model"] == model]
        others = [m for m in paper.RESOLVES if m not in paper.E1S_ONLY_IN]
        first = pd.concat([rows[rows["fault"].isin(others).to_numpy()], both])
        table.add(t.label(model), t.rate(data.rate(first, "duplicate")),
                  rate_of(data, rows, "duplicate", set(paper.CONN_RESET)),
                  rate_of(data, rows, "duplicate", set(paper.LATE_COMMIT)),
                  rate_of(data, rows, "duplicate", set(paper.REDELIVERY)),
                  rate_of(data, rows, "task_success", set(paper.NOT_EXECUTED)),
                  rate_of(data, rows[rows["fault"] != "none"], "exactly_once"),
                  t.count(len(rows)))
    table.notes += [weighting_note(data, table), excluded(data.experiment("e1")),
                    batch_note(data, len(batch))]
    if rated.empty:
        table.notes.append("Columns other than partial batch — " + absent("e1"))
    return table


def batch_note(data: Data, rated: int) -> str:
    """What Table 3's partial-batch column holds: E1s is named only when a run of it is."""
    if data.experiment("e1s").empty:
        return (f"Partial batch: E1 only ({rated} rated episodes); the paper's column adds the "
                f"E1s supplement, which no loaded run holds (`limbo run e1s`).")
    return (f"Partial batch: E1 and the E1s supplement ({rated} rated episodes); every other "
            f"column E1 only (the paper's Table 3).")


SHAPLEY_FACTORS = {"contract": "contract_class", "mode": "fault", "model": "model",
                   "harness": "harness"}
COLUMNS = {"pooled": paper.POOLED, "read-back resolves": paper.RESOLVES,
           "read-back cannot": paper.CANNOT}
"""Table 4's columns and their fault sets (its caption)."""


def shapley_of(rows: pd.DataFrame) -> Shapley:
    """Shapley shares of the four factor groups for duplicates, fitted on collapsed cells."""
    factors = list(SHAPLEY_FACTORS.values())
    cells = rows.groupby(factors, observed=True)["duplicate"].agg(["sum", "count"])
    cells = cells.rename(columns={"sum": "y", "count": "n"}).reset_index()
    return shapley_r2(cells, factors)


def _share(result: Shapley, column: str, rows: pd.DataFrame,
           boot: Interval | None) -> t.Entry:
    if rows[column].nunique() < 2:
        return t.Entry(t.EMPTY)
    if boot is None:
        return t.share(result.share[column])
    at = list(SHAPLEY_FACTORS.values()).index(column)
    return t.share(result.share[column], Interval(boot.estimate[at], boot.lo[at], boot.hi[at],
                                                  boot.replicates, boot.clusters, boot.undefined,
                                                  boot.seed))


def column_rows(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    return rows[rows["fault"].isin(COLUMNS[column]).to_numpy()]


def shapley_for(data: Data, block: str, rows: pd.DataFrame, column: str) -> Shapley:
    """The decomposition of one column of Table 4 (computed once; H2 reads it too)."""
    part = column_rows(rows, column)
    return data.cached(("shapley", block, column), lambda: shapley_of(part))


def shapley_interval(data: Data, block: str, rows: pd.DataFrame) -> Interval | None:
    """The cluster-bootstrap interval of the shares (in :data:`SHAPLEY_FACTORS` order, then the
    total R²) of ``rows`` — one column of a block — or None without ``--bootstrap``."""
    if rows.empty:
        return None
    factors = list(SHAPLEY_FACTORS.values())
    statistic = shapley_statistic(rows, factors, "duplicate")
    return data.uncertainty.frame(rows, statistic, f"table 4: Shapley shares, {block}")


def _block(data: Data, table: t.Table, name: str, rows: pd.DataFrame) -> None:
    fits = {col: column_rows(rows, col) for col in COLUMNS}
    results = {col: shapley_for(data, name, rows, col) for col in COLUMNS}
    boots = {col: shapley_interval(data, f"{name} {col}", fits[col]) for col in COLUMNS}
    for factor, column in SHAPLEY_FACTORS.items():
        table.add(t.label(name), t.label(f"{factor} share (%)"),
                  *[_share(results[c], column, fits[c], boots[c]) for c in COLUMNS])
    table.add(t.label(name), t.label("total pseudo-R²"),
              *[t.number(results[c].total_r2, len(fits[c]), 2) for c in COLUMNS])
    table.add(t.label(name), t.label("duplicate rate (%)"),
              *[t.rate(data.rate(fits[c], "duplicate")) for c in COLUMNS])
    table.add(t.label(name), t.label("episodes"), *[t.count(len(fits[c])) for c in COLUMNS])


def shapley_blocks(data: Data) -> dict[str, pd.DataFrame]:
    """E1's rated episodes, and E3's vanilla arm (native) on the tasks every harness present
    ran (so a harness with more instances weighs no more) when it has several harnesses."""
    e1 = data.experiment("e1")
    blocks = {"E1": e1[e1["rated"].to_numpy()]}
    e3 = data.experiment("e3")
    native = e3[e3["rated"].to_numpy() & (e3["condition"] == "vanilla").to_numpy()]
    if native["harness"].nunique() > 1:
        task = ["template", "instance", "focal_write"]
        harnesses = native.groupby(task, observed=True)["harness"]
        blocks["E3"] = native[harnesses.transform("nunique") == native["harness"].nunique()]
    return blocks


def shares_note(data: Data) -> str:
    """What the shares' intervals are, or how to get them."""
    u = data.uncertainty
    if not u.replicates:
        return ("Shares have no formula for an interval: `--bootstrap B` gives each a "
                f"cluster-bootstrap interval (resampling the {u.noun}).")
    return (f"[95% cluster-bootstrap interval of each share: {u.describe()}; "
            f"{u.noun} resampled with replacement, shares refitted.]")


def table4(data: Data) -> t.Table:
    """Shapley decomposition of McFadden's R² for duplicates over contract class, mode, model
    and harness: E1, and (when several harnesses are loaded) E3."""
    table = t.Table(4, "Shapley decomposition of explained variance in duplicates",
                    ["experiment", "factor", *COLUMNS], keys=2)
    data.stamp(table)
    blocks = shapley_blocks(data)
    if column_rows(blocks["E1"], "pooled").empty:
        table.absent = absent("e1")
        return table
    for name, rows in blocks.items():
        _block(data, table, name, rows)
    if "E3" not in blocks:
        table.notes.append("E3 block omitted: no E3 run with several harnesses is loaded "
                           "(`limbo run e3` where the production harnesses are installed).")
    table.notes += [
        "Shares of McFadden's pseudo-R² (main-effects logit on collapsed cells, Bernoulli "
        "likelihood); contract = the focal write's contract class. '—' = the factor has one "
        "level in these episodes.", shares_note(data),
        "Columns as the paper's caption: read-back resolves = lost acknowledgement, "
        "misleading 500, partial batch; read-back cannot = late commit, redelivery; pooled = "
        f"both ({', '.join(paper.POOLED)})."]
    return table
