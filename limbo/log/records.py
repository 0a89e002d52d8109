"""The episode record, written once: the record's own parts are :class:`TypedDict` types, and
a pydantic :class:`TypeAdapter` over :class:`EpisodeRecord` is its edge — the JSON Schema
``limbo schema`` prints (and docs/records.md ships) is generated from it, and
:func:`limbo.log.reader.validate` checks a stored record with it.

Why TypedDicts inside and pydantic only at the edge: the episode runner builds a record once
per episode and a grid writes tens of thousands of them. A TypedDict is a plain dict at run
time, so building one costs what building the dict did and the encoder writes the same bytes
(key order as built); the type checker holds the builder and every reader to the field names,
which a dict of strings could not. Building pydantic models on that path would tax every
episode of a grid and write through a second serialiser.

Parts whose fields a lower floor defines are not written again here: the cell (:class:`limbo.
sim.cell.CellFields`), its timing and limits (:mod:`limbo.sim.config`), the report and each
event (:mod:`limbo.sim.events`), and a turn's usage (:class:`Usage`, the adapters' public type).
The record holds them as dicts, and :class:`As` checks each against its model at the edge.

A record is one JSON object per line of ``episodes*.jsonl``; :mod:`limbo.log.reader` is the one
module that reads them, and holds the versions this LIMBO reads. Version policy: :data:`SCHEMA`
names the shape (``limbo.episode/N``); any change of the JSON shape bumps ``N``
(:mod:`limbo.log.versions` holds the versions and the id pattern, and
:mod:`limbo.sim.kinds` the closed sets, for readers that need no model).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, TypeAdapter, with_config
from pydantic_core import core_schema
from typing_extensions import TypedDict

from limbo.log.versions import EPISODE_ID as EPISODE_ID
from limbo.log.versions import REPLICATE_SCHEMA as REPLICATE_SCHEMA
from limbo.log.versions import SCHEMA as SCHEMA
from limbo.log.versions import SCHEMA_PREFIX as SCHEMA_PREFIX
from limbo.log.versions import Version as Version
from limbo.sim.cell import CellFields
from limbo.sim.config import Limits, Timing

# The record's closed sets, handed on: a reader of records (the analysis) checks them here.
from limbo.sim.events import EVENT_TYPES as EVENT_TYPES
from limbo.sim.events import TERMINATIONS as TERMINATIONS
from limbo.sim.events import Attempt, Event, Report, Termination
from limbo.sim.service import Contract

_WRITTEN = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                      use_attribute_docstrings=True,
                      json_schema_serialization_defaults_required=True, defer_build=True)
"""Every part here describes what is written: no unknown fields, no NaN, no coercion (a
``"yes"`` is not a ``true``), and every field required in the schema (a writer always writes
each one). Built on first use: a run writes records as plain dicts and never validates one,
so its start-up does not build the record's validators (readers and ``limbo schema`` do)."""


class As:
    """Marks a dict of the record whose shape is a lower floor's model: the edge checks the dict
    against ``model`` and keeps the dict (the schema shows the model's)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(_checked,
                                                           handler.generate_schema(self.model))


def _checked(value: Any, check: Callable[[Any], Any]) -> Any:
    check(value)
    return value


# -- the parts a lower floor defines, as written ---------------------------------------------


def _replicate_optional(schema: dict[str, Any]) -> None:
    """The schema's ``replicate`` is present only in ``/2`` records (see :data:`Version`)."""
    schema["required"] = [name for name in schema.get("required", []) if name != "replicate"]


class RecordCell(CellFields):
    """The cell the episode ran (:class:`limbo.sim.cell.Cell` without timing and limits, which the
    header holds); ``replicate`` only in a ``limbo.episode/2`` record."""

    model_config = ConfigDict(**_WRITTEN, json_schema_extra=_replicate_optional)

    contract: Contract = Field(strict=False)
    """A contract's name (strict validation would want the enum itself)."""


class RecordTiming(Timing):
    model_config = _WRITTEN


class RecordLimits(Limits):
    model_config = _WRITTEN


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


CellPart = Annotated[dict[str, Any], As(RecordCell)]
TimingPart = Annotated[dict[str, Any], As(RecordTiming)]
LimitsPart = Annotated[dict[str, Any], As(RecordLimits)]
ReportPart = Annotated[dict[str, Any], As(Report)]
EventPart = Annotated[dict[str, Any], As(Event)]
UsagePart = Annotated[dict[str, Any], As(UsageEntry)]

# -- the record's own parts ------------------------------------------------------------------

NonNegative = Annotated[int, Field(ge=0)]


@with_config(_WRITTEN)
class Intent(TypedDict):
    """One effect the task requires: ledger effects of ``tool`` whose arguments equal
    ``match`` and contain each ``contains`` text."""

    id: str
    tool: str
    match: dict[str, Any]
    contains: dict[str, str]


@with_config(_WRITTEN)
class Header(TypedDict):
    """What the episode was given: costs, limits, prompt hashes, the task and its intents."""

    timing: TimingPart
    limits: LimitsPart
    prompts: dict[str, str]
    """Condition prompt file → hash of its text."""
    task_prompt: str | None
    intents: list[Intent]
    version: str
    """The LIMBO package version that ran the episode."""
    plan_hash: str | None


# The write-class sets of limbo.sim.service.OpSpec.write_class.
Idempotency = Literal["keyed", "natural", "conditional", "none"]
ReadPath = Literal["strong", "eventual", "none"]
Reversibility = Literal["reversible", "irreversible"]


@with_config(_WRITTEN)
class WriteClass(TypedDict):
    """Idempotency, read path and reversibility of a write under the episode's contract."""

    idempotency: Idempotency
    read_path: ReadPath
    reversibility: Reversibility


class _Fired(TypedDict):
    fault_fired: bool


@with_config(_WRITTEN)
class Graded(TypedDict):
    """The outcome's fields that grading gives (:func:`limbo.log.grading.grade`)."""

    commits: dict[str, int]
    duplicate: bool
    missing: bool
    spurious: NonNegative
    compensated: bool
    task_success: bool
    exactly_once: bool
    report_status: Literal["completed", "partial", "failed", "none"]
    claimed_clean: bool
    overclaim: bool
    focal_write_class: WriteClass | None


@with_config(_WRITTEN)
class Outcome(_Fired, Graded):
    """The graded outcome (docs/metrics.md and the spec's grading section define each field)."""

    agent_time_s: Annotated[float, Field(ge=0)]
    tool_calls: NonNegative
    model_turns: NonNegative
    input_tokens: NonNegative
    output_tokens: NonNegative
    cost_usd: Annotated[float, Field(ge=0)] | None
    """``None`` when a price is unknown."""
    termination: Termination
    termination_reason: str | None


@with_config(_WRITTEN)
class LedgerEntry(TypedDict):
    """One committed effect (the spec's ledger)."""

    seq: NonNegative
    t: Annotated[float, Field(ge=0)]
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


@with_config(ConfigDict(extra="allow", strict=True, use_attribute_docstrings=True,
                        json_schema_serialization_defaults_required=True))
class Runtime(TypedDict):
    """Wall-clock facts: the one part allowed to differ between runs of one cell. A harness may
    add its own (a production harness's event stream, its stderr)."""

    wall_s: Annotated[float, Field(ge=0)]
    host: str
    python: str
    platform: str


@with_config(_WRITTEN)
class EpisodeRecord(TypedDict):
    """One episode: what ran, what it was given, how it was graded, and everything that
    happened, in sim-time order."""

    schema: Version
    episode_id: Annotated[str, Field(pattern=EPISODE_ID)]
    cell: CellPart
    header: Header
    outcome: Outcome
    report: ReportPart | None
    events: list[EventPart]
    ledger: list[LedgerEntry]
    usage: list[UsagePart]
    runtime: Runtime


EDGE: TypeAdapter[EpisodeRecord] = TypeAdapter(EpisodeRecord)
"""The record's edge: checks a stored record's whole shape, and generates its JSON Schema."""
_HINTS = get_type_hints(EpisodeRecord)
RECORD_FIELDS: tuple[str, ...] = tuple(_HINTS)
"""The record's keys, in the order they are written (the analysis loader finds ``cell`` and
``outcome`` by offset, so the order is part of the shape)."""
CELL_FIELDS: tuple[str, ...] = tuple(RecordCell.model_fields)


def _is(annotation: Any, *types: type) -> bool:
    """Whether ``annotation`` is one of ``types``, alone or with ``None``."""
    args = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
    return len(args) == 1 and args[0] in types


_OUTCOME = get_type_hints(Outcome)
FLAGS: tuple[str, ...] = tuple(n for n, t in _OUTCOME.items() if _is(t, bool))
"""The outcome's yes/no fields, in record order."""
NUMBERS: tuple[str, ...] = tuple(n for n, t in _OUTCOME.items() if _is(t, int, float))
"""The outcome's counts and amounts, in record order."""
WRITE_CLASS_FIELDS: tuple[str, ...] = tuple(get_type_hints(WriteClass))


def json_schema(part: Literal["record", "event"] = "record") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a record, or of one event, generated from the types."""
    adapter: TypeAdapter[Any] = EDGE if part == "record" else TypeAdapter(Event)
    schema = adapter.json_schema(mode="serialization", by_alias=True)
    versions = " and ".join(get_args(Version))
    title = f"{versions} record" if part == "record" else f"{versions} event"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, **{
        k: v for k, v in schema.items() if k != "title"}}


def schema_text(part: Literal["record", "event"] = "record") -> str:
    """:func:`json_schema` as printed by ``limbo schema`` and shown in docs/records.md."""
    return json.dumps(json_schema(part), indent=2, ensure_ascii=False)
