"""Tables 8 and 9: the harnesses (E3, E3k). Rows only for harnesses that have episodes."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import E3, Data, ordered
from limbo.analysis.loader import modes_of
from limbo.analysis.tables.common import excluded, rate_of, weighting_note


def known_harnesses() -> list[str]:
    """Every registered harness (built-in, production CLIs of E3 and plugins alike)."""
    from limbo.registry import entries

    names = list(entries("harness"))
    return sorted(names, key=lambda h: (HARNESS_ORDER.index(h) if h in HARNESS_ORDER
                                        else len(HARNESS_ORDER), h))


HARNESS_ORDER = ("minimal", "codex", "copilot", "claude-code", "hermes")
"""The paper's row order; other harnesses follow by name."""


def missing_note(present: set[str]) -> str:
    missing = [h for h in known_harnesses() if h not in present]
    if not missing:
        return ""
    return (f"No episodes for {', '.join(missing)}: their rows are omitted, not filled "
            f"(`limbo run e3` / `e3k` produce them where those harnesses are installed).")


def table8(data: Data) -> t.Table:
    """Harness × model under the native contract: duplicates by fault family (vanilla), and
    EOS without and with the guard."""
    table = t.Table(8, "Harnesses (E3): native contract",
                    ["harness", "model", "dup: read-back resolves", "dup: late commit",
                     "dup: redelivery", "EOS vanilla", "EOS guard", "n"], keys=2)
    population = E3.of(data.frame)
    population = population[population["contract"] == "native"]
    rated = population[population["rated"]]
    if rated.empty:
        table.absent = E3.absent()
        return table
    resolves, late = modes_of(["read-back resolves"]), modes_of(["late commit"])
    for harness in ordered(rated["harness"].unique(), HARNESS_ORDER):
        block = rated[rated["harness"] == harness]
        for model, rows in block.groupby("model", sort=True, observed=True):
            vanilla, guard = (_faulted(rows, c) for c in ("vanilla", "guard"))
            table.add(t.label(harness), t.label(model),
                      rate_of(data, vanilla, "duplicate", resolves),
                      rate_of(data, vanilla, "duplicate", late),
                      rate_of(data, vanilla, "duplicate", {"redelivery"}),
                      rate_of(data, vanilla, "exactly_once"),
                      rate_of(data, guard, "exactly_once"), t.count(len(rows)))
    table.notes += [n for n in (missing_note(set(rated["harness"])), weighting_note(data),
                                "EOS over faulted episodes.", excluded(population)) if n]
    return table


def _faulted(rows: pd.DataFrame, condition: str) -> pd.DataFrame:
    return rows[(rows["condition"] == condition) & (rows["fault"] != "none")]


def table9(data: Data) -> t.Table:
    """Harness × model: duplicate rate under committed faults and redelivery for each
    contract × condition, and EOS with keys everywhere and the guard."""
    arms = [("native", "vanilla"), ("native", "guard"), ("keys-everywhere", "vanilla"),
            ("keys-everywhere", "guard")]
    table = t.Table(9, "Harnesses by contract and condition (E3, E3k)",
                    ["harness", "model", *[f"dup: {c} + {k}" for c, k in arms],
                     "EOS: keys + guard"], keys=2)
    population = E3.of(data.frame)
    rated = population[population["rated"]]
    if rated.empty:
        table.absent = E3.absent()
        return table
    modes = modes_of(["read-back resolves", "late commit"]) | {"redelivery"}
    for harness in ordered(rated["harness"].unique(), HARNESS_ORDER):
        block = rated[rated["harness"] == harness]
        for model, rows in block.groupby("model", sort=True, observed=True):
            by_arm = [rows[(rows["contract"] == c) & (rows["condition"] == k)] for c, k in arms]
            table.add(t.label(harness), t.label(model),
                      *[rate_of(data, r, "duplicate", modes) for r in by_arm],
                      rate_of(data, by_arm[3][by_arm[3]["fault"] != "none"], "exactly_once"))
    table.notes += [n for n in (missing_note(set(rated["harness"])), weighting_note(data),
                                excluded(population)) if n]
    return table
