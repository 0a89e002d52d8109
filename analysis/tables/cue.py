"""Table 10: the cue ablation (E6) — the default instruction against the one without the
closing exactly-once sentence, on paired episodes of the comparison ``cue``."""

from __future__ import annotations

from limbo.analysis import pairtable, paper
from limbo.analysis import table as t
from limbo.analysis.data import Data, absent
from limbo.analysis.tables.conditions import paired_arms


def table10(data: Data) -> t.Table:
    """The paper's rows (:data:`limbo.analysis.paper.TABLE10_ROWS`): the metric under default
    and plain, the paired difference, pairs, the sign-flip test over worlds (primary) and the
    exact McNemar test, each with Holm over the rows."""
    table = t.Table(10, "Cue ablation (E6): default vs plain instruction, paired",
                    ["fault family", "metric", "default (%)", "plain (%)", "Δ (pp)", "pairs",
                     *pairtable.HEADER], keys=2)
    data.stamp(table)
    matched = data.matched("e6", "cue", arms=("vanilla", "plain"))
    pairs = paired_arms(matched, "vanilla", "plain") if matched is not None else None
    if pairs is None or pairs.rated.empty:
        table.absent = absent("e6")
        return table
    rated, u = pairs.rated, data.uncertainty
    found = [(row, metric, outcome, rated[rated["fault"].isin(modes).to_numpy()])
             for row, metric, outcome, modes in paper.TABLE10_ROWS]
    tests = [pairtable.test(u, rows, outcome, f"table 10: {row}")
             for row, _, outcome, rows in found]
    for (row, metric, outcome, rows), ps in zip(found, pairtable.columns(tests), strict=True):
        n = len(rows)
        default = rows[f"{outcome}_a"].mean() if n else float("nan")
        plain = rows[f"{outcome}_b"].mean() if n else float("nan")
        interval = pairtable.difference(u, rows, outcome, f"table 10: {row} difference")
        table.add(t.label(row), t.label(metric), t.number(100 * default, n),
                  t.number(100 * plain, n), t.points(plain - default, n, interval), t.count(n),
                  *ps)
    table.notes.append(
        "Rows as the paper's Table 10: not executed (" + ", ".join(paper.NOT_EXECUTED) + "), "
        "read-back resolves (" + ", ".join(paper.RESOLVES) + "), late commit, redelivery, no "
        "fault. Pairs share every pairing factor of the comparison; both rated. Unpaired: "
        f"{len(pairs.unpaired_a)} vanilla, {len(pairs.unpaired_b)} plain; "
        f"{len(pairs.frame) - len(rated)} pairs with an unrated episode."
        + (f" {pairs.ambiguous} episodes set aside: their pairing key repeats."
           if pairs.ambiguous else "") + f" Unweighted paired rates; {u.describe()}.")
    table.notes.append(pairtable.note(u, "the rows with pairs"))
    table.notes.append(matched.note() if matched is not None else "")
    return table
