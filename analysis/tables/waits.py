"""Table 6: waiting versus keys under late commits (E5)."""

from __future__ import annotations

import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import Data, absent, ordered, wait_bound
from limbo.analysis.tables.common import excluded, none_rated, weighting_note

FIXED, TAIL = "timeout_late", "timeout_late_tail"
HEADER = ["contract", "condition", "fixed: EOS (%)", "fixed: dup (%)", "fixed: time (min)",
          "tail: EOS (%)", "tail: dup (%)", "tail: time (min)", "P(δ ≤ Δ) (%)"]


def wait_order(conditions: set[str], recorded: dict[str, float] | None = None) -> list[str]:
    """vanilla, then the wait conditions by their bound, then the rest in the paper's order."""
    waits = sorted((c for c in conditions if c.startswith("wait-")),
                   key=lambda c: wait_bound(c, recorded) or 0.0)
    head = [c for c in ("vanilla",) if c in conditions] + waits
    return head + [c for c in ordered(conditions) if c not in head]


def _arm(data: Data, rows: pd.DataFrame) -> list[t.Entry]:
    if rows.empty:
        return [t.Entry(t.EMPTY)] * 3
    return [t.rate(data.rate(rows, "exactly_once")),
            t.rate(data.rate(rows, "duplicate")),
            t.number(data.mean(rows, "agent_time_s") / 60, len(rows))]


WORLD = ("template", "focal_write", "instance", "seed")
"""A world: the task and its seed. Every arm and model of E5 runs in the same worlds, so the
in-flight delay δ is one number per world, whatever the row."""


def world_delays(data: Data, rows: pd.DataFrame) -> pd.DataFrame:
    """δ (column ``delay``) of each distinct world among ``rows`` under the tail delay (from
    the first episode of the world whose fault event records it), one row per world with its
    :data:`WORLD` fields."""
    tail = rows[(rows["fault"] == TAIL).to_numpy()]
    if tail.empty:
        return pd.DataFrame(columns=[*WORLD, "delay"])
    found = tail[list(WORLD)].astype(str).assign(delay=data.delays(tail).to_numpy())
    return found.groupby(list(WORLD), sort=True).first().dropna().reset_index()


def _p_within(data: Data, condition: str, delays: pd.DataFrame) -> t.Entry:
    """The share of tail-delay worlds whose δ is within the condition's bound; each counts
    once, and those of one (template, instance) go together as any other episodes do."""
    bound = wait_bound(condition, data.waits())
    if bound is None or delays.empty:
        return t.Entry(t.EMPTY)
    within = (delays["delay"] <= bound).to_numpy()
    found, boot = data.uncertainty.rate(within, delays, None, "P(delay within)")
    return t.rate(found, boot=boot)


def table6(data: Data) -> t.Table:
    """EOS, duplicate rate and mean agent time for each condition under the fixed 90 s and
    the heavy-tailed delay, and how often the tail delay is within the wait's bound."""
    table = t.Table(6, "Waiting versus keys under late commits (E5)", HEADER, keys=2)
    data.stamp(table)
    matched = data.matched("e5", "waits")
    if matched is None or none_rated(matched):
        table.absent = absent("e5")
        return table
    every = matched.rows
    delays = world_delays(data, every)
    rated = every[every["rated"].to_numpy()]
    for contract in ordered(rated["contract"].unique(), ("native", "keys-everywhere")):
        block = rated[(rated["contract"] == contract).to_numpy()]
        for condition in wait_order(set(block["condition"].astype(str)), data.waits()):
            rows = block[(block["condition"] == condition).to_numpy()]
            table.add(t.label(contract), t.label(condition),
                      *_arm(data, rows[(rows["fault"] == FIXED).to_numpy()]),
                      *_arm(data, rows[(rows["fault"] == TAIL).to_numpy()]),
                      _p_within(data, condition, delays))
    table.notes += [weighting_note(data, table) + " Time: mean agent-visible episode time in sim "
                    "minutes (same weights).",
                    f"P(δ ≤ Δ): share of the {len(delays)} distinct tail-delay worlds (template, "
                    f"focal write, instance, seed) whose in-flight delay δ (from the fault event) "
                    f"is within the wait's bound Δ; each world counts once, whichever row, model "
                    f"or contract ran it.",
                    matched.note(), excluded(every)]
    return table
