"""The world-file format: services, their tools and task templates, declared as data.

A world file is TOML validated by these models (``extra`` fields are refused everywhere, so a
typo is an error, never a silently ignored setting). The models say *what* a team's API does
at the boundary — which writes take keys and how they are scoped, which reads lag, which writes
have no read path, how a batch is made of units — and, for a simulated service, the few facts
LIMBO needs to play it (which records a write creates or changes). The same file describes a
service that LIMBO only fronts (``proxy = true``): its tools are declared, not simulated.

This module imports nothing of LIMBO's but the template models, so another component (the
proxy of issue 30) can read world files without building a world. Cross-field rules (a read
listing a write that does not exist, an effect naming a missing argument, ...) are in
:mod:`limbo.sim.worldfile.rules`; the JSON Schema published in ``docs/world-file.schema.json`` is
:func:`json_schema`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from limbo.sim.tasks import Step, VarSpec

Scalar = str | int | float | bool
WORLD_NAME = r"^[a-z][a-z0-9-]{0,39}$"
SERVICE_NAME = r"^[a-z][a-z0-9]{0,23}$"
"""As a Python service's name (``@service``): tool names are ``<service>_<operation>``."""
OP_NAME = r"^[a-z][a-z0-9_]{0,38}$"
FIELD_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

ServiceName = Annotated[str, Field(pattern=SERVICE_NAME)]
OpName = Annotated[str, Field(pattern=OP_NAME)]
FieldName = Annotated[str, Field(pattern=FIELD_NAME)]
Seconds = Annotated[float, Field(ge=0, le=86_400)]
ArgType = Literal["string", "integer", "number", "boolean", "object", "list"]
ItemType = Literal["string", "integer", "number", "boolean", "object"]


class _WorldModel(BaseModel):
    """Strict, as a tool's arguments are: ``proxy = "yes"`` or ``min = "1"`` is a mistake to
    name, not a value to guess (lax parsing reads ``"no"`` as false and ``"yes"`` as true).
    Built on first use: a run of the built-in world never reads a world file."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True,
                              allow_inf_nan=False, strict=True, defer_build=True)


class Arg(_WorldModel):
    """One argument of a tool. Required unless it has a ``default`` or says
    ``required = false`` (then it may be left out, and is ``null``)."""

    type: ArgType
    description: str = ""
    required: bool = True
    default: Scalar | None = None
    enum: list[str] | list[int] | None = None
    """The only values accepted (strings or integers)."""
    min: float | None = None
    """Smallest value (integer, number)."""
    max: float | None = None
    """Largest value (integer, number)."""
    min_length: int | None = Field(None, ge=0)
    """Fewest characters (string) or items (list)."""
    max_length: int | None = Field(None, ge=1)
    """Most characters (string; every string is capped at 8000 anyway) or items (list)."""
    items: ItemType | None = None
    """What a list holds (lists only; an ``object`` is a flat map of scalar fields)."""

    @model_validator(mode="after")
    def _consistent(self) -> Arg:
        numeric = self.type in ("integer", "number")
        sized = self.type in ("string", "list")
        if self.enum is not None and self.type not in ("string", "integer"):
            raise ValueError("enum is for string and integer arguments")
        if (self.min is not None or self.max is not None) and not numeric:
            raise ValueError("min and max are for integer and number arguments")
        if (self.min_length is not None or self.max_length is not None) and not sized:
            raise ValueError("min_length and max_length are for string and list arguments")
        if (self.items is None) == (self.type == "list"):
            raise ValueError("a list argument says what it holds (items = ...), and only a "
                             "list does")
        if self.default is not None and self.required and "required" in self.model_fields_set:
            raise ValueError("an argument with a default is not required")
        _ordered(self.min, self.max, "min", "max")
        _ordered(self.min_length, self.max_length, "min_length", "max_length")
        if self.enum == []:
            raise ValueError("enum lists no value, so no call could pass one: list the values, "
                             "or drop enum")
        return self

    @property
    def optional(self) -> bool:
        return self.default is not None or not self.required


def _ordered(low: float | None, high: float | None, lo: str, hi: str) -> None:
    if low is not None and high is not None and low > high:
        raise ValueError(f"{lo} = {low:g} is above {hi} = {high:g}, so no value fits: write "
                         f"{lo} <= {hi}")


class HonouredWhen(_WorldModel):
    """The key is offered on every call but honoured only when one argument has one of the
    listed values (as Mastodon honours a key and other platforms ignore it)."""

    honoured_when: dict[str, list[Scalar]] = Field(min_length=1, max_length=1)


KeySupport = Literal["none", "honoured", "ignored"] | HonouredWhen
"""Native idempotency-key support: ``none`` (no key parameter), ``honoured`` (an optional key
that deduplicates), ``ignored`` (a key parameter that does nothing), or honoured per argument."""


class Uniform(_WorldModel):
    """A round trip drawn uniformly from [min, max] seconds."""

    min: Seconds
    max: Seconds

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.max < self.min:
            raise ValueError("max must be at least min")
        return self


class LogNormal(_WorldModel):
    """A heavy-tailed round trip: log-normal with this median and sigma, capped at ``max``."""

    median: Annotated[float, Field(gt=0, le=86_400)]
    sigma: Annotated[float, Field(gt=0, le=5)]
    max: Annotated[float, Field(gt=0, le=86_400)]


Latency = Seconds | Uniform | LogNormal


class BatchDef(_WorldModel):
    """A batch write: argument ``units`` lists the units, each committing as its own effect
    (the effect's other fields, plus ``unit``: the item)."""

    units: FieldName
    unit: FieldName
    atomic: bool = False
    """``false``: units commit one by one, so a failure can leave the first ones committed
    (the ``partial_batch`` fault acts here); ``true``: all or nothing."""


class ReadBackDef(_WorldModel):
    """Which read shows this write's effect, when it is not the first read that lists it."""

    tool: OpName
    """A read of the same service (its operation name)."""
    args: dict[str, Any] = {}
    """Fixed arguments of that read; ``"{arg}"`` takes the write's argument."""
    match: list[FieldName] | None = None
    """The write's arguments an item must equal (default: its effect fields)."""


class Write(_WorldModel):
    """A write tool: what identifies its effect, its native key contract, and how LIMBO plays
    it when the service is simulated."""

    description: str = Field(min_length=1)
    args: dict[FieldName, Arg] = {}
    effect: list[FieldName] = Field(min_length=1)
    """The arguments that identify the business effect: two calls that agree on them are the
    same effect (these are the ledger entry's arguments, and what templates match on)."""
    key: KeySupport = "none"
    key_scope: Literal["service", "tool"] = "service"
    """Where a key is unique: across the service's writes, or per tool."""
    key_ttl_s: Annotated[float, Field(gt=0, le=30 * 86_400)] = 86_400.0
    """How long the service remembers a key in the native contract (keys-everywhere: 24 h)."""
    reversible: bool = True
    batch: BatchDef | None = None
    latency_s: Latency | None = None
    """Round trip of a call (request + response; the effect commits half-way); default: the
    grid's ``timing.write_s``."""
    read_back: ReadBackDef | None = None
    id_field: FieldName | None = None
    """The field that carries the object's id in results and read items."""
    result: dict[FieldName, Any] | None = None
    """What a success of this write answers, for the proxy's ``phantom_success`` (an
    acknowledgement of a call that is then dropped): its fields, where ``"{arg}"`` takes the
    call's argument and ``"{id}"`` a fresh id. Without it the proxy refuses that mode here."""
    # -- how a simulated service plays it (ignored for a proxy service) --
    action: Literal["create", "update", "delete", "upsert"] = "create"
    record: FieldName | None = None
    """The kind of record the write creates or changes (a simulated service needs it)."""
    id_prefix: Annotated[str, Field(pattern=r"^[a-z]{1,8}$")] | None = None
    target: FieldName | None = None
    """update/delete: the argument holding the id of the record acted on."""
    find: list[FieldName] = []
    """update/delete: arguments the target record must also equal, else 404."""
    when: dict[FieldName, Scalar] = {}
    """update: field values the record must hold, else 409 ``conflict`` (a repeat of a write
    that changes them is refused: natural idempotency)."""
    when_args: dict[FieldName, FieldName] = {}
    """update: record field -> argument it must equal, else 409 (a conditional write)."""
    set: dict[FieldName, Scalar] = {}
    """create/update: fields written with these values."""
    set_args: dict[FieldName, FieldName] = {}
    """update: record field -> argument whose value it takes."""
    upsert_key: FieldName | None = None
    """upsert: the argument that names the record (a repeat with it changes nothing)."""
    reverses: bool = False
    """update/delete: the write undoes its target's last effect (a refund, a cancel)."""


class LagBy(_WorldModel):
    """A read path whose lag depends on one argument's value."""

    by: FieldName
    values: dict[str, Seconds | Literal["unavailable"]] = Field(min_length=1)
    default: Seconds | Literal["unavailable"] = "unavailable"


class SearchDef(_WorldModel):
    """Text search: items where any of ``fields`` contains argument ``arg`` (any case)."""

    arg: FieldName
    fields: list[FieldName] = Field(min_length=1)


class Read(_WorldModel):
    """A read tool: which writes' effects it shows, and how far behind commits it is."""

    description: str = Field(min_length=1)
    args: dict[FieldName, Arg] = {}
    lists: list[OpName] = Field(min_length=1)
    """The writes (operation names of this service) whose effects this read shows."""
    lag_s: Seconds | Literal["unavailable"] | LagBy = 0.0
    """0: strong; > 0: eventual, a commit shows that many seconds later; ``unavailable``: no
    read path (the read answers ``not_available``)."""
    # -- how a simulated service plays it --
    filter: list[FieldName] = []
    """Arguments an item's field of the same name must equal (an argument left out or
    ``null`` does not filter)."""
    search: SearchDef | None = None
    limit: FieldName | None = None
    """The argument that caps how many items come back."""
    max_items: int = Field(200, ge=1, le=10_000)
    order: Literal["newest", "oldest"] = "newest"


class ServiceDef(_WorldModel):
    """One service: its writes and reads (tools ``<service>_<operation>``)."""

    description: str = ""
    proxy: bool = False
    """Declared only: LIMBO fronts the team's own server instead of playing the service;
    ``limbo run`` refuses a world with such a service."""
    writes: dict[OpName, Write] = {}
    reads: dict[OpName, Read] = {}


class TemplateDef(_WorldModel):
    """A task: the request, its parameters per instance, the setup, and the plan whose write
    steps carry the required effects (``intent``)."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    service: ServiceName | None = None
    """The service the task is about (default: that of its first focal write)."""
    prompt: str = Field(min_length=1)
    vars: dict[str, VarSpec] = {}
    setup: list[Step] = []
    steps: list[Step] = Field(min_length=1)
    focal: list[str] | None = None
    """Step ids whose writes may carry the episode's fault (default: every write step)."""


class WorldInfo(_WorldModel):
    name: str = Field(pattern=WORLD_NAME)
    description: str = ""


class WorldFile(_WorldModel):
    """A whole world file (or the union of a world directory's files)."""

    world: WorldInfo
    services: dict[ServiceName, ServiceDef] = Field(min_length=1)
    templates: list[TemplateDef] = []


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a world file."""
    schema = WorldFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "LIMBO world file", **{k: v for k, v in schema.items() if k != "title"}}


def schema_text() -> str:
    """:func:`json_schema` as published in ``docs/world-file.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
