"""How a record's cell and outcome become the analysis row, and the type every column must have.

Field names come from the record types (:mod:`limbo.log.records`), so a rename touches that
module and this one follows. The versions read are the reader's (:data:`limbo.log.reader.
READABLE`): every one of them has this shape; a version whose shape differs would give its
own row here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from limbo.log.records import CELL_FIELDS, FLAGS, NUMBERS, WRITE_CLASS_FIELDS

Row = dict[str, Any]


def row_of(cell: dict[str, Any], outcome: dict[str, Any]) -> Row:
    """The fields as recorded; their types are checked per column (:func:`check_types`)."""
    row: Row = {name: cell[name] for name in CELL_FIELDS if name != "replicate"}
    row["replicate"] = cell.get("replicate", 0)  # only /2 records carry it (≥ 1)
    for name in (*FLAGS, *NUMBERS, "report_status", "termination"):
        row[name] = outcome[name]
    wclass = outcome.get("focal_write_class") or {}
    for name in WRITE_CLASS_FIELDS:
        row[name] = str(wclass.get(name, "unknown"))
    return row


EXPECTED = {**{name: "str" for name in CELL_FIELDS
               if name not in ("instance", "seed", "replicate")},
            "instance": "int", "seed": "int", "replicate": "int", **dict.fromkeys(FLAGS, "bool"),
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
