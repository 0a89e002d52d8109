"""Tables 8 and 9: the harnesses (E3, E3k), vanilla and guard matched by the comparison
``guard`` of each. Rows only for harnesses that have episodes."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import paper
from limbo.analysis import table as t
from limbo.analysis.arms import Matched
from limbo.analysis.data import Data, absent, ordered
from limbo.analysis.tables.common import excluded, none_rated, rate_of, weighting_note

HARNESS_ORDER = ("minimal", "codex", "copilot", "claude-code", "hermes")
"""The paper's harnesses, in its row order; other harnesses with episodes follow by name.

A note names those of them without episodes, and H5 those it could not test. It is the paper's
list, not today's registry: what a table says of a run must not change with the plugins or
production harnesses installed on the machine that reads it (and reading it loads no harness)."""


def missing_note(present: set[str]) -> str:
    missing = [h for h in HARNESS_ORDER if h not in present]
    if not missing:
        return ""
    return (f"No episodes for {', '.join(missing)}: their rows are omitted, not filled "
            f"(`limbo run e3` / `e3k` produce them where those harnesses are installed).")


def guard_arms(data: Data, experiment: str) -> Matched | None:
    """Vanilla and guard of ``experiment`` on the cells both ran; ``None`` without any."""
    found = data.matched(experiment, "guard", arms=("vanilla", "guard"))
    return None if none_rated(found) else found


def _rated_faulted(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["rated"].to_numpy() & (rows["fault"] != "none").to_numpy()]


def table8(data: Data) -> t.Table:
    """Harness × model under the native contract: duplicates by fault family (vanilla), and
    EOS without and with the guard, on matched cells."""
    table = t.Table(8, "Harnesses (E3): native contract",
                    ["harness", "model", "dup: read-back resolves", "dup: late commit",
                     "dup: redelivery", "EOS vanilla", "EOS guard", "n"], keys=2)
    data.stamp(table)
    matched = guard_arms(data, "e3")
    if matched is None:
        table.absent = absent("e3")
        return table
    vanilla, guard = matched["vanilla"], matched["guard"]
    for harness in ordered(set(vanilla["harness"].astype(str)), HARNESS_ORDER):
        v_h, g_h = vanilla[vanilla["harness"] == harness], guard[guard["harness"] == harness]
        for model in sorted(set(v_h["model"].astype(str))):
            v = v_h[(v_h["model"] == model).to_numpy()]
            g = g_h[(g_h["model"] == model).to_numpy()]
            rated = v[v["rated"].to_numpy()]
            table.add(t.label(harness), t.label(model),
                      rate_of(data, rated, "duplicate", set(paper.RESOLVES)),
                      rate_of(data, rated, "duplicate", set(paper.LATE_COMMIT)),
                      rate_of(data, rated, "duplicate", set(paper.REDELIVERY)),
                      rate_of(data, _rated_faulted(v), "exactly_once"),
                      rate_of(data, _rated_faulted(g), "exactly_once"),
                      t.count(int(v["rated"].sum() + g["rated"].sum())))
    table.notes += [n for n in (missing_note(set(vanilla["harness"].astype(str))),
                                weighting_note(data, table), "EOS over faulted episodes; n = rated "
                                "episodes of both arms.", matched.note(),
                                excluded(matched.rows)) if n]
    return table


def table9(data: Data) -> t.Table:
    """Harness × model: duplicate rate under committed faults and redelivery for each
    contract × condition, and EOS with keys everywhere and the guard."""
    arms = [("native", "vanilla"), ("native", "guard"), ("keys-everywhere", "vanilla"),
            ("keys-everywhere", "guard")]
    table = t.Table(9, "Harnesses by contract and condition (E3, E3k)",
                    ["harness", "model", *[f"dup: {c} + {k}" for c, k in arms],
                     "EOS: keys + guard"], keys=2)
    data.stamp(table)
    found = {"native": guard_arms(data, "e3"), "keys-everywhere": guard_arms(data, "e3k")}
    present = {c: m for c, m in found.items() if m is not None}
    if not present:
        table.absent = absent("e3", "e3k")
        return table
    both = pd.concat([m.rows for m in present.values()])
    for harness in ordered(set(both["harness"].astype(str)), HARNESS_ORDER):
        block = both[(both["harness"] == harness).to_numpy()]
        for model in sorted(set(block["model"].astype(str))):
            rows = block[(block["model"] == model).to_numpy() & block["rated"].to_numpy()]
            by_arm = [rows[(rows["contract"] == c).to_numpy() & (rows["condition"] == k)
                           .to_numpy()] for c, k in arms]
            table.add(t.label(harness), t.label(model),
                      *[rate_of(data, r, "duplicate", set(paper.POOLED)) for r in by_arm],
                      rate_of(data, by_arm[3][(by_arm[3]["fault"] != "none").to_numpy()],
                              "exactly_once"))
    table.notes += [n for n in (missing_note(set(both["harness"].astype(str))),
                                weighting_note(data, table), *(m.note() for m in present.values()),
                                excluded(both)) if n]
    if len(present) < 2:
        gone = "e3k" if "native" in present else "e3"
        table.notes.append(f"Columns of the other contract — {absent(gone)}")
    return table
