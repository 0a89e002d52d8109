"""Table 0: the summary of whatever is loaded — every run has numbers.

The paper's tables hold the paper's population only; a run of the README's ``default`` grid, a
world-file grid, a ``limbo mcp`` or a ``limbo proxy`` run is in none of them. This table holds
every loaded episode: duplicate rate, task success, exactly-once success and overclaim (as
``limbo run``'s summary defines them) by arm × contract × world × fault family, each rate with
its clustered interval, and the runs it pools.

An *arm* is the agent under test: its model (or, for ``limbo mcp`` and ``limbo proxy``, the
agent's label), with its harness and condition when they are not the minimal loop's vanilla —
arms are always told apart by all three, so loading another run never pools a number into one
it does not share all three with.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from limbo.analysis import table as t
from limbo.analysis.data import REFERENCE_CAVEAT, Data, TracedRate, ordered
from limbo.analysis.runs import BUILT_IN
from limbo.analysis.tables.common import weighting_note
from limbo.analysis.tables.harnesses import HARNESS_ORDER

METRICS = {"dup": "duplicate", "TS": "task_success", "EOS": "exactly_once",
           "overclaim": "overclaim"}
"""The summary's rates, as ``limbo run``'s summary prints them, over rated episodes."""
FAMILY_ORDER = ("read-back resolves", "late commit", "read-back cannot", "not executed",
                "phantom", "none")
KEYS = ["model", "harness", "condition", "contract", "world", "family"]
HEADER = ["arm", "contract", "world", "fault family", *METRICS, "episodes", "worlds",
          "replicates"]


def arm(model: str, harness: str, condition: str) -> str:
    """The arm's label: the model, then its harness and condition where they are not the
    minimal loop's vanilla (``policy/blind · guard``, ``external/mcp-client · mcp``)."""
    parts = [model, *([harness] if harness != "minimal" else []),
             *([condition] if condition != "vanilla" else [])]
    return " · ".join(parts)


def groups(frame: pd.DataFrame) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """(key, row positions) of each arm × contract × world × family with episodes, in the
    table's order: arms by model, harness and condition (the paper's orders first), contracts
    native first, the built-in world first, families in the order of the fault table
    (docs/faults.md)."""
    found = frame.groupby(KEYS, observed=True, sort=False).indices
    keys = [tuple(map(str, k)) for k in found]
    orders = [ordered({k[1] for k in keys}, HARNESS_ORDER), ordered({k[2] for k in keys}),
              ordered({k[3] for k in keys}, ("native", "keys-everywhere")),
              ordered({k[4] for k in keys}, (BUILT_IN,)), ordered({k[5] for k in keys},
                                                                  FAMILY_ORDER)]
    order = sorted(zip(keys, found.values(), strict=True), key=lambda kv: (
        kv[0][0], *(levels.index(value) for levels, value in zip(orders, kv[0][1:],
                                                                  strict=True))))
    return [(key, np.asarray(positions)) for key, positions in order]


@dataclass(frozen=True)
class Row:
    """One row of the summary: its key (model, harness, condition, contract, world, family),
    the rate of each of :data:`METRICS`, and what it pools."""

    key: tuple[str, ...]
    rates: list[TracedRate]
    episodes: int
    worlds: int
    replicates: int

    @property
    def arm(self) -> str:
        return arm(*self.key[:3])


def plain(data: Data) -> Data:
    """``data`` without a bootstrap (its caches shared): the summary's rates have the tables'
    interval only — hundreds of rows, four rates each, would each take a bootstrap."""
    return dataclasses.replace(data, uncertainty=dataclasses.replace(data.uncertainty,
                                                                     replicates=0))


def summary_rows(data: Data) -> list[Row]:
    """Every row of the summary, in order (:func:`groups`), its rates with the tables'
    interval and no bootstrap: the summary has hundreds of rows on a large grid, four rates
    each. Rows are taken by position from a frame of the few columns a rate reads."""
    data = plain(data)
    frame = data.frame
    small = frame[["template", "instance", *METRICS.values()]]
    rated = frame["rated"].to_numpy()
    worlds = frame.groupby(["template", "instance"], observed=True, sort=False).ngroup()
    worlds = worlds.to_numpy()
    found = []
    for key, at in groups(frame[KEYS]):
        mine = at[rated[at]]
        found.append(Row(key, data.rates(small.iloc[mine], tuple(METRICS.values())), len(at),
                         len(np.unique(worlds[mine])), data.seeds.count_at(mine)))
    return found


def table0(data: Data) -> t.Table:
    """Every loaded episode: dup, TS, EOS and overclaim by arm × contract × world × fault
    family, with clustered intervals, the worlds and replicates behind each row."""
    table = t.Table(0, "Summary of every loaded run: rates by arm, contract, world and fault "
                    "family", HEADER, keys=4)
    data = plain(data)
    frame = data.frame
    if frame.empty:
        table.absent = "No episodes loaded."
        return table
    table.sources = data.describe_runs(np.ones(len(frame), dtype=bool))
    if frame["model"].astype(str).str.startswith("policy/").any():
        table.caveat = REFERENCE_CAVEAT
    rows = summary_rows(data)
    for row in rows:
        table.add(t.label(row.arm), *map(t.label, row.key[3:]), *map(t.rate, row.rates),
                  t.count(row.episodes), t.count(row.worlds), t.count(row.replicates))
    table.notes += [weighting_note(data, table), _pooled(frame), DEFINITIONS,
                    data.seeds.note([row.replicates for row in rows])]
    return table


DEFINITIONS = ("dup: a write committed more than once; TS: the task's intended effects all "
               "happened; EOS: each exactly once; overclaim: the agent reported a clean "
               "completion of an episode that did not end exactly once — each over rated "
               "episodes (the fault fired, not errored), as `limbo run`'s summary counts them. "
               "Episodes: every episode of the row, errored ones included; worlds: the worlds "
               "(template, instance) its rated episodes ran in; replicates: the most seeds of "
               "one world among them.")


def _pooled(frame: pd.DataFrame) -> str:
    """What the table pools: runs, worlds, and what wrote the runs."""
    kinds = frame["source"].astype(str).value_counts()
    what = ", ".join(f"{n:,} from {kind} runs" for kind, n in sorted(kinds.items()))
    return (f"Pools every loaded episode ({len(frame):,}: {what}), paper grids or not; the "
            f"paper's tables (3–13) hold only their captions' populations.")
