"""The episode record, typed and versioned: one pydantic model per part, and the JSON Schema
published from them (``limbo schema``, docs/records.md).

A record is one JSON object per line of ``episodes*.jsonl``; :class:`EpisodeRecord` is its
shape, :data:`limbo.sim.events.Event` the shape of each event. Readers of every kind take field
names from here, so renaming a field touches this module (and the schema version).

Why records are still written as plain dicts: the episode runner builds a record once per
episode and ``json.dumps`` it, and a grid writes tens of thousands of them; building and
dumping models on that path would slow every grid. The models pin the shape instead — a test
validates a whole default grid against them and against the published JSON Schema (with an
independent validator), and asserts that dumping the validated model gives the record back.

Version policy: :data:`SCHEMA` names the shape (``limbo.episode/N``). Any change of the JSON
shape bumps ``N``; a reader either reads each version in :data:`READABLE` or refuses a record
of another version with one line (:func:`version_problem`), never misreads it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from limbo.base.errors import UsageError
from limbo.services import Contract
from limbo.sim.cell import CellFields
from limbo.sim.config import Limits, Timing

# The record's closed sets, handed on: a reader of records (the analysis) checks them here.
from limbo.sim.events import EVENT_TYPES as EVENT_TYPES
from limbo.sim.events import TERMINATIONS as TERMINATIONS
from limbo.sim.events import Attempt, Event, Report, Termination

SCHEMA_PREFIX = "limbo.episode/"
EPISODE_ID = r"^[A-Za-z0-9_.:-]{1,200}$"

_WRITTEN = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                      use_attribute_docstrings=True,
                      json_schema_serialization_defaults_required=True)
"""Every model here describes what is written: no unknown fields, no NaN, no coercion (a
``"yes"`` is not a ``true``), and every field required in the schema (a writer always writes
each one)."""


class _Part(BaseModel):
    model_config = _WRITTEN


class RecordCell(CellFields):
    """The cell the episode ran (:class:`limbo.sim.cell.Cell` without timing and limits, which the
    header holds)."""

    model_config = _WRITTEN

    contract: Contract = Field(strict=False)
    """A contract's name (strict validation would want the enum itself)."""


class RecordTiming(Timing):
    model_config = _WRITTEN


class RecordLimits(Limits):
    model_config = _WRITTEN


class Intent(_Part):
    """One effect the task requires: ledger effects of ``tool`` whose arguments equal
    ``match`` and contain each ``contains`` text."""

    id: str
    tool: str
    match: dict[str, Any]
    contains: dict[str, str]


class Header(_Part):
    """What the episode was given: costs, limits, prompt hashes, the task and its intents."""

    timing: RecordTiming
    limits: RecordLimits
    prompts: dict[str, str]
    """Condition prompt file → hash of its text."""
    task_prompt: str | None
    intents: list[Intent]
    version: str
    """The LIMBO package version that ran the episode."""
    plan_hash: str | None


# The write-class sets of limbo.services.base.OpSpec.write_class.
Idempotency = Literal["keyed", "natural", "conditional", "none"]
ReadPath = Literal["strong", "eventual", "none"]
Reversibility = Literal["reversible", "irreversible"]


class WriteClass(_Part):
    """Idempotency, read path and reversibility of a write under the episode's contract."""

    idempotency: Idempotency
    read_path: ReadPath
    reversibility: Reversibility


class Outcome(_Part):
    """The graded outcome (docs/metrics.md and the spec's grading section define each field)."""

    fault_fired: bool
    commits: dict[str, int]
    duplicate: bool
    missing: bool
    spurious: int = Field(ge=0)
    compensated: bool
    task_success: bool
    exactly_once: bool
    report_status: Literal["completed", "partial", "failed", "none"]
    claimed_clean: bool
    overclaim: bool
    focal_write_class: WriteClass | None
    agent_time_s: float = Field(ge=0)
    tool_calls: int = Field(ge=0)
    model_turns: int = Field(ge=0)
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float | None = Field(ge=0)
    """``None`` when a price is unknown."""
    termination: Termination
    termination_reason: str | None


class LedgerEntry(_Part):
    """One committed effect (the spec's ledger)."""

    seq: int = Field(ge=0)
    t: float = Field(ge=0)
    service: str
    op: str
    tool: str
    args: dict[str, Any]
    object_id: str | None
    request_id: str
    attempt: Attempt
    key: str | None
    write_class: WriteClass
    reverses: str | None
    """The object this compensating effect undid (refund, delete, revert), if any."""


class Usage(BaseModel):
    """Tokens and cost of one model call: counts >= 0, a finite cost >= 0 (checked again at
    the adapter boundary, :mod:`limbo.episode.isolation`, for turns built without validation)."""

    model_config = ConfigDict(allow_inf_nan=False)

    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cached_input_tokens: int = Field(0, ge=0)
    cost_usd: float | None = Field(0.0, ge=0)
    """``None`` when the price is unknown (never treated as free)."""


class UsageEntry(Usage):
    """Tokens and cost of one model turn."""

    model_config = _WRITTEN

    turn: int = Field(ge=1)


class Runtime(BaseModel):
    """Wall-clock facts: the one part allowed to differ between runs of one cell. A harness may
    add its own (a production harness's event stream, its stderr)."""

    model_config = ConfigDict(extra="allow", strict=True, use_attribute_docstrings=True,
                              json_schema_serialization_defaults_required=True)

    wall_s: float = Field(ge=0)
    host: str
    python: str
    platform: str


class EpisodeRecord(_Part):
    """One episode: what ran, what it was given, how it was graded, and everything that
    happened, in sim-time order."""

    schema_: Literal["limbo.episode/1"] = Field(alias="schema")
    episode_id: str = Field(pattern=EPISODE_ID)
    cell: RecordCell
    header: Header
    outcome: Outcome
    report: Report | None
    events: list[Event]
    ledger: list[LedgerEntry]
    usage: list[UsageEntry]
    runtime: Runtime


SCHEMA: str = get_args(EpisodeRecord.model_fields["schema_"].annotation)[0]
"""The version of the record shape that this LIMBO writes (bump it with any change of shape)."""
READABLE: tuple[str, ...] = (SCHEMA,)
"""The versions this LIMBO reads."""
RECORD_FIELDS: tuple[str, ...] = tuple(f.alias or n for n, f in EpisodeRecord.model_fields.items())
"""The record's keys, in the order they are written (the analysis loader finds ``cell`` and
``outcome`` by offset, so the order is part of the shape)."""
CELL_FIELDS: tuple[str, ...] = tuple(RecordCell.model_fields)


def _is(annotation: Any, *types: type) -> bool:
    """Whether ``annotation`` is one of ``types``, alone or with ``None``."""
    args = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
    return len(args) == 1 and args[0] in types


FLAGS: tuple[str, ...] = tuple(n for n, f in Outcome.model_fields.items() if _is(f.annotation, bool))
"""The outcome's yes/no fields, in record order."""
NUMBERS: tuple[str, ...] = tuple(n for n, f in Outcome.model_fields.items()
                                 if _is(f.annotation, int, float))
"""The outcome's counts and amounts, in record order."""
WRITE_CLASS_FIELDS: tuple[str, ...] = tuple(WriteClass.model_fields)


def json_schema(part: Literal["record", "event"] = "record") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a record, or of one event."""
    model: Any = EpisodeRecord if part == "record" else TypeAdapter(Event)
    schema = (model.model_json_schema(mode="serialization", by_alias=True) if part == "record"
              else model.json_schema(mode="serialization"))
    title = f"{SCHEMA} record" if part == "record" else f"{SCHEMA} event"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **{
        k: v for k, v in schema.items() if k != "title"}}


def schema_text(part: Literal["record", "event"] = "record") -> str:
    """:func:`json_schema` as printed by ``limbo schema`` and shown in docs/records.md."""
    return json.dumps(json_schema(part), indent=2, ensure_ascii=False)


# -- reading ---------------------------------------------------------------------------------


class RecordError(UsageError):
    """A stored record that this LIMBO cannot read: one line saying why."""


def version_problem(schema: Any) -> str | None:
    """Why a record of version ``schema`` cannot be read here (``None``: it can)."""
    if schema in READABLE:
        return None
    if isinstance(schema, str) and schema.startswith(SCHEMA_PREFIX):
        return (f"schema {schema!r} is not one this LIMBO reads ({', '.join(READABLE)}); "
                f"read it with the LIMBO version that wrote it")
    return f"no {SCHEMA_PREFIX}N schema"


def closed_set_problem(record: dict[str, Any]) -> str | None:
    """The cheap checks a reader makes on every record it parses: a known version, a known
    termination, known event types (the full shape is :func:`parse_record`'s)."""
    problem = version_problem(record.get("schema"))
    if problem is not None:
        return problem
    outcome = record.get("outcome")
    termination = outcome.get("termination") if isinstance(outcome, dict) else None
    if termination not in TERMINATIONS:
        return f"outcome.termination {termination!r:.40} is not one of {', '.join(TERMINATIONS)}"
    for i, event in enumerate(record.get("events") or ()):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind not in EVENT_TYPES:
            return f"events[{i}] has unknown type {kind!r:.40}"
    return None


def parse_record(record: dict[str, Any], where: str = "the record") -> EpisodeRecord:
    """``record`` as an :class:`EpisodeRecord`; a :class:`RecordError` naming the first
    problem otherwise (a version this LIMBO does not read is said as such)."""
    problem = version_problem(record.get("schema"))
    if problem is not None:
        raise RecordError(f"{where}: {problem}")
    try:
        return EpisodeRecord.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{where} is not a valid {SCHEMA} record: {at}: {first['msg']} "
                          f"({exc.error_count()} problem(s))") from None
