"""Table 6: waiting versus keys under late commits (E5)."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import E5, Data, ordered, wait_bound
from limbo.analysis.stats import kish_rate
from limbo.analysis.tables.common import excluded, weighting_note

FIXED, TAIL = "timeout_late", "timeout_late_tail"
HEADER = ["contract", "condition", "fixed: EOS (%)", "fixed: dup (%)", "fixed: time (min)",
          "tail: EOS (%)", "tail: dup (%)", "tail: time (min)", "P(δ ≤ Δ) (%)"]


def wait_order(conditions: set[str]) -> list[str]:
    """vanilla, then the wait conditions by their bound, then the rest in the paper's order."""
    waits = sorted((c for c in conditions if c.startswith("wait-")),
                   key=lambda c: wait_bound(c) or 0.0)
    head = [c for c in ("vanilla",) if c in conditions] + waits
    return head + [c for c in ordered(conditions) if c not in head]


def _arm(data: Data, rows: pd.DataFrame) -> list[t.Entry]:
    if rows.empty:
        return [t.Entry(t.EMPTY)] * 3
    return [t.rate(data.rate(rows, "exactly_once")),
            t.rate(data.rate(rows, "duplicate")),
            t.number(data.mean(rows, "agent_time_s") / 60, len(rows))]


def _p_within(data: Data, condition: str, tail: pd.DataFrame) -> t.Entry:
    bound = wait_bound(condition)
    if bound is None or tail.empty:
        return t.Entry(t.EMPTY)
    delays = data.delays(tail)
    known = delays.dropna()
    return t.rate(kish_rate((known <= bound).to_numpy()), counts=True)


def table6(data: Data) -> t.Table:
    """EOS, duplicate rate and mean agent time for each condition under the fixed 90 s and
    the heavy-tailed delay, and how often the tail delay is within the wait's bound."""
    table = t.Table(6, "Waiting versus keys under late commits (E5)", HEADER, keys=2)
    population = E5.of(data.frame)
    rated = population[population["rated"]]
    if rated.empty:
        table.absent = E5.absent()
        return table
    for contract in ordered(rated["contract"].unique(), ("native", "keys-everywhere")):
        block = rated[rated["contract"] == contract]
        for condition in wait_order(set(block["condition"])):
            rows = block[block["condition"] == condition]
            tail = rows[rows["fault"] == TAIL]
            table.add(t.label(contract), t.label(condition),
                      *_arm(data, rows[rows["fault"] == FIXED]), *_arm(data, tail),
                      _p_within(data, condition, tail))
    table.notes += [weighting_note(data) + " Time: mean agent-visible episode time in sim "
                    "minutes (same weights).",
                    "P(δ ≤ Δ): share of this row's tail-delay worlds whose in-flight delay δ "
                    "(from the fault event) is within the wait's bound Δ.",
                    excluded(population)]
    return table
