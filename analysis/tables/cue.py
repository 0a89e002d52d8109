"""Table 10: the cue ablation (E6) — the default instruction against the one without the
closing exactly-once sentence, on paired episodes."""

from __future__ import annotations

from limbo.analysis import table as t
from limbo.analysis.data import E6, Data
from limbo.analysis.stats import discordant, holm, mcnemar_exact
from limbo.analysis.tables.conditions import paired_condition

FAMILY_METRIC = {"not executed": ("TS", "task_success"),
                 "read-back resolves": ("dup", "duplicate"),
                 "late commit": ("dup", "duplicate"),
                 "read-back cannot": ("dup", "duplicate"),
                 "phantom": ("TS", "task_success"),
                 "none": ("EOS", "exactly_once")}
"""Each family's metric: where the write never ran (or a success was phantom) the risk is a
missing effect, so task success; where it committed, duplicates; with no fault, EOS."""


def table10(data: Data) -> t.Table:
    """Per fault family: the metric under default and plain, the paired difference, exact
    McNemar p (and Holm over the families) and the number of pairs."""
    table = t.Table(10, "Cue ablation (E6): default vs plain instruction, paired",
                    ["fault family", "metric", "default (%)", "plain (%)", "Δ (pp)",
                     "McNemar p", "Holm p", "pairs"], keys=2)
    pairs = paired_condition(E6.of(data.frame), "vanilla", "plain")
    rated = pairs.rated
    if rated.empty:
        table.absent = ("no paired vanilla/plain episodes (the same cells under both "
                        "conditions); `limbo run e6` produces them")
        return table
    found = []
    for family, (metric, outcome) in FAMILY_METRIC.items():
        rows = rated[rated["family_a"] == family]
        if len(rows):
            test = mcnemar_exact(*discordant(rows[f"{outcome}_a"], rows[f"{outcome}_b"]))
            found.append((family, metric, outcome, rows, test))
    adjusted = holm([f[4].pvalue for f in found])
    for (family, metric, outcome, rows, test), p_holm in zip(found, adjusted, strict=True):
        default, plain = rows[f"{outcome}_a"].mean(), rows[f"{outcome}_b"].mean()
        table.add(t.label(family), t.label(metric), t.number(100 * default, len(rows)),
                  t.number(100 * plain, len(rows)), t.points(plain - default, len(rows)),
                  t.pvalue(test.pvalue), t.pvalue(float(p_holm)), t.count(len(rows)))
    table.notes.append(f"Pairs share every cell field but the condition; both rated. "
                       f"Unpaired: {len(pairs.unpaired_a)} vanilla, {len(pairs.unpaired_b)} "
                       f"plain; {len(pairs.frame) - len(rated)} pairs with an unrated episode."
                       + (f" {pairs.ambiguous} episodes set aside: their pairing key repeats."
                          if pairs.ambiguous else ""))
    return table
