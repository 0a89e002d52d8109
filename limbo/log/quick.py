"""Quick verdicts on a record line: what :func:`~limbo.log.reader.decode` would say of it,
and the few fields a caller counts, read by msgspec against a typed shape
(:mod:`limbo.log.shapes`) without building the record — ``limbo status`` and a resume's scan
(:func:`glance`), a resumed run's summary (:func:`tallied_line`), the report's episode details
(:func:`ledger_parts`). A line the shape cannot vouch for (bad, a big integer, a lone
surrogate, an odd type, deep) goes to the full decode, so every verdict is the full one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar

import msgspec

from limbo.log.reader import READABLE, SHALLOW, VALID_ID, Skip, decode
from limbo.log.shapes import HeaderAndLedger, RecordHead, TallyHead


class Glance(NamedTuple):
    """What ``limbo status`` counts of a record, each field as :func:`decode`'s record has it
    (a tuple: a helper process sends tens of thousands back, :mod:`limbo.log.spread`)."""

    episode_id: str
    termination: str
    reason: Any
    model: Any
    fault_fired: Any


_SHAPE = msgspec.json.Decoder(RecordHead)


def glance(raw: bytes) -> Glance | Skip:
    """:func:`decode`'s verdict and the record's :class:`Glance`, at a tenth of the cost: a line
    shaped as written records are is judged by msgspec's typed decoder, which builds only
    those fields; any other (bad, a big integer, a lone surrogate, an odd type, deep) by
    :func:`decode`. msgspec refuses what Python's decoder refuses but invalid UTF-8, checked."""
    found = _typed(raw)
    if found is not None:
        return found
    record = decode(raw)
    if isinstance(record, Skip):
        return record
    outcome = record["outcome"]
    return Glance(record["episode_id"], outcome["termination"],
                  outcome.get("termination_reason"), record["cell"].get("model"),
                  outcome.get("fault_fired"))


def _typed(raw: bytes) -> Glance | None:
    shape = _shaped(raw, _SHAPE)
    if shape is None:
        return None
    out = shape.outcome
    return Glance(shape.episode_id, out.termination, out.termination_reason, shape.cell.model,
                  out.fault_fired)


_Head = TypeVar("_Head", RecordHead, TallyHead)


def _shaped(raw: bytes, decoder: msgspec.json.Decoder[_Head]) -> _Head | None:
    """``raw`` read against a typed shape, when msgspec's verdict stands for :func:`decode`'s."""
    if not raw.endswith(b"\n") or raw.count(b"[") + raw.count(b"{") > SHALLOW:
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        shape = decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    if shape.schema not in READABLE or not VALID_ID.match(shape.episode_id):
        return None
    return shape


_TALLY = msgspec.json.Decoder(TallyHead)
Tallied = tuple[str, Mapping[str, Any], Mapping[str, Any]]
"""(episode id, cell, outcome): what the end-of-run summary adds up of a record."""


def tallied_line(raw: bytes) -> Tallied | Skip:
    """:func:`decode`'s verdict on a line and, for a record, the cell and outcome the run's
    summary counts (:meth:`limbo.run.summary.Summary.add`): a resumed run summarises every
    record of its directory, and decoding each whole took two seconds of a paper-grid re-run
    that had nothing left to do. A line shaped as written records are is read by msgspec
    against :class:`~limbo.log.shapes.TallyHead`, which builds only those fields; any other
    by :func:`decode`, whose cell and outcome are then handed over whole."""
    shape = _shaped(raw, _TALLY)
    if shape is not None:
        cell, out = shape.cell, shape.outcome
        return (shape.episode_id, {"model": cell.model, "fault": cell.fault},
                {"termination": out.termination, "termination_reason": out.termination_reason,
                 "fault_fired": out.fault_fired, "duplicate": out.duplicate,
                 "task_success": out.task_success, "exactly_once": out.exactly_once,
                 "overclaim": out.overclaim, "cost_usd": out.cost_usd,
                 "model_calls": out.model_calls})
    record = decode(raw)
    if isinstance(record, Skip):
        return record
    return record["episode_id"], record["cell"], record["outcome"]


_LEDGER = msgspec.json.Decoder(HeaderAndLedger)


def ledger_parts(text: str) -> tuple[Any, Any] | None:
    """A line's ``header`` and ``ledger`` when the whole line is one strict JSON object,
    decoding nothing else; ``None`` when only a full parse can say (see :func:`glance`)."""
    if text.count("[") + text.count("{") > SHALLOW:
        return None
    try:
        found = _LEDGER.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return found.header, found.ledger
