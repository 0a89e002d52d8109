"""Each record schema version the analysis reads, as one :class:`Reader`: how a record's cell
and outcome become the analysis row, and how its events are decoded (lazily, by offset).

Field names come from the record models (:mod:`limbo.log.records`), so a rename touches that module
and this one follows. A new version is one more entry of :data:`SCHEMAS`, mapping it to the
same row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from limbo.log.records import (
    CELL_FIELDS,
    EVENT_TYPES,
    FLAGS,
    NUMBERS,
    WRITE_CLASS_FIELDS,
    RecordError,
)

_DECODER = json.JSONDecoder()


Row = dict[str, Any]


@dataclass(frozen=True)
class Reader:
    """How one schema version maps to the analysis row."""

    row: Callable[[dict[str, Any], dict[str, Any]], Row]
    """(cell, outcome) → the row's cell and outcome fields."""
    events: Callable[[str], Iterator[dict[str, Any]]]
    """A record's line → its events, in order (lazily)."""


def _row_v1(cell: dict[str, Any], outcome: dict[str, Any]) -> Row:
    """The fields as recorded; their types are checked per column (:func:`check_types`)."""
    row: Row = {name: cell[name] for name in CELL_FIELDS}
    for name in (*FLAGS, *NUMBERS, "report_status", "termination"):
        row[name] = outcome[name]
    wclass = outcome.get("focal_write_class") or {}
    for name in WRITE_CLASS_FIELDS:
        row[name] = str(wclass.get(name, "unknown"))
    return row


EXPECTED = {**{name: "str" for name in CELL_FIELDS if name not in ("instance", "seed")},
            "instance": "int", "seed": "int", **dict.fromkeys(FLAGS, "bool"),
            **dict.fromkeys(NUMBERS, "number"), "report_status": "str", "termination": "str"}
"""The type every column must have: a "false" string must not read as true."""
_INFERRED = {"str": ("string",), "int": ("integer",), "bool": ("boolean",),
             "number": ("integer", "floating", "mixed-integer-float", "empty")}
_ONE = {"str": lambda v: type(v) is str, "int": lambda v: type(v) is int,
        "bool": lambda v: type(v) is bool,
        "number": lambda v: v is None or type(v) in (int, float)}


def check_types(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """``frame`` without the rows that have a field of the wrong type, and (episode id,
    reason) for each of those. Whole columns are checked at once; a column that fails is
    scanned to find its rows."""
    bad = np.zeros(len(frame), dtype=bool)
    reasons: dict[int, str] = {}
    for column, kind in EXPECTED.items():
        inferred = pd.api.types.infer_dtype(frame[column], skipna=kind == "number")
        if inferred in _INFERRED[kind] and (kind == "number" or not frame[column].isna().any()):
            continue
        wrong = ~frame[column].map(_ONE[kind]).to_numpy(dtype=bool)
        for i in np.flatnonzero(wrong & ~bad):
            reasons[int(i)] = f"{column!r} is {type(frame[column].iloc[i]).__name__}"
        bad |= wrong
    found = [(str(frame["episode_id"].iloc[i]), why) for i, why in sorted(reasons.items())]
    frame = frame[~bad].copy()
    for name in NUMBERS:
        frame[name] = frame[name].astype(float)
    return frame, found


def _events_v1(text: str) -> Iterator[dict[str, Any]]:
    """The events one by one, decoded by offset (the list follows ``report``), so a reader
    that stops early — the recovery classifier, the first fault event — decodes no more."""
    start = text.find('"events": [', text.find('"report": '))
    if start < 0:
        yield from json.loads(text)["events"]
        return
    i = _skip(text, start + 11)
    while text[i] != "]":
        event, i = _DECODER.raw_decode(text, i)
        yield event
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)


def typed(events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``events``, each checked against the closed set of event types as it is decoded."""
    for i, event in enumerate(events):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind not in EVENT_TYPES:
            raise RecordError(f"events[{i}] has unknown type {kind!r:.40}")
        yield event


def _skip(text: str, i: int) -> int:
    while text[i] in " \t\r\n":
        i += 1
    return i


SCHEMAS: dict[str, Reader] = {
    "limbo.episode/1": Reader(row=_row_v1, events=_events_v1),
}
"""Known record versions. A new version is one entry: a reader mapping it to the same row."""
