"""The shapes msgspec's typed decoders read a record line against (:mod:`limbo.log.reader`
decodes with them): only the fields a quick verdict needs, each typed as the full decode would
give it, so msgspec refuses a line whose fields the full decode would refuse.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from limbo.sim.kinds import EVENT_TYPES, TERMINATIONS

_Termination = Literal[tuple(TERMINATIONS)]  # type: ignore[valid-type]
_EventType = Literal[tuple(sorted(EVENT_TYPES))]  # type: ignore[valid-type]


class _Cell(msgspec.Struct):  # each field as the record's .get() gives it, or msgspec refuses
    model: str | None = None


class _Outcome(msgspec.Struct):
    termination: _Termination  # type: ignore[valid-type]
    termination_reason: str | None = None
    fault_fired: bool | None = None


class _EventHead(msgspec.Struct):
    type: _EventType  # type: ignore[valid-type]


class RecordHead(msgspec.Struct):
    """A record as :func:`limbo.log.quick.glance` judges it; other keys are skipped, checked
    strict JSON."""

    schema: str
    episode_id: str
    cell: _Cell
    outcome: _Outcome
    events: list[_EventHead]


class _TallyCell(msgspec.Struct):
    model: str
    fault: str


class _TallyOutcome(_Outcome, kw_only=True):  # required: the fields the summary indexes
    fault_fired: bool | None
    duplicate: bool
    task_success: bool
    exactly_once: bool
    overclaim: bool
    cost_usd: int | float | None = None
    model_calls: Any = None
    """Not in a written record's outcome (its runtime holds them), but counted if there."""


class TallyHead(msgspec.Struct):
    """:class:`RecordHead` with what the end-of-run summary counts of a record (its cell's
    model and fault, its outcome's flags and cost); a line without them in these types, which
    the summary would read from the whole record, is left to the full decode."""

    schema: str
    episode_id: str
    cell: _TallyCell
    outcome: _TallyOutcome
    events: list[_EventHead]


class HeaderAndLedger(msgspec.Struct):
    """A record's ``header`` and ``ledger`` (the report's episode details), nothing else built."""

    header: Any = None
    ledger: Any = None
