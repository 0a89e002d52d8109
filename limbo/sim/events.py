"""The typed event log of one episode.

Every event is a flat JSON object with the sim time ``t`` and a ``type``; each type is one
pydantic model below, and :data:`Event` is their discriminated union. The closed set of event
types is named in :mod:`limbo.sim.kinds` (each model's ``type`` is its name there), where a
reader of records finds it without importing these models. Agent-visible events (``turn``,
``call``, ``result``, ``finish``) and hidden ones (``fault``, ``commit``, ``arrival``,
``replay``, ``lagged_read``, ``condition``, ``guard``, ``clock``, ``limit``) share one ordered
list, so a timeline can show both sides at once.

Why the log still stores plain dicts: an episode emits dozens of events and a grid tens of
thousands of episodes, so building a model per event would tax every episode. :meth:`EventLog.emit`
instead checks what is cheap and catches the mistakes that matter — an unknown type, a missing
or unknown field name — against the models' field sets; values are checked where records are
read (:mod:`limbo.log.records`), and a test validates a whole grid's events against the published
JSON Schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import simpy
from pydantic import BaseModel, ConfigDict, Field

from limbo.base.errors import InfraError

# The closed sets, handed on: what the models below and their readers check against.
from limbo.sim.kinds import EVENT_TYPES as EVENT_TYPES
from limbo.sim.kinds import TERMINATIONS as TERMINATIONS
from limbo.sim.kinds import VISIBLE_TYPES as VISIBLE_TYPES
from limbo.sim.kinds import (
    ArrivalType,
    CallType,
    ClockType,
    CommitType,
    ConditionType,
    FaultType,
    FinishType,
    GuardType,
    LaggedReadType,
    LimitType,
    ReplayType,
    ResultType,
    TurnType,
)
from limbo.sim.kinds import Termination as Termination

Attempt = Annotated[str, Field(pattern=r"^(original|redelivered|reissue-[1-9][0-9]*"
                                       r"|scaffold_retry-[1-9][0-9]*)$")]
"""Which sending of a request: the first, the agent's n-th re-issue, a scaffold's n-th retry,
or a copy the transport redelivered."""


class _Event(BaseModel):
    """Built on first use (``defer_build``): the log checks field names only (below), so an
    episode never validates an event; readers of records and the JSON Schema build them."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              use_attribute_docstrings=True, defer_build=True)

    t: float = Field(ge=0)
    """Sim time in seconds."""


class Turn(_Event):
    """A model turn: what it said and which tools it called."""

    type: TurnType
    n: int = Field(ge=1)
    text: str | None
    tools: list[str]


class Call(_Event):
    """A tool call as the agent issued it (huge arguments summarised)."""

    type: CallType
    id: str
    tool: str
    args: Any


class ResultEvent(_Event):
    """The tool result the agent received (:mod:`limbo.sim.results`)."""

    type: ResultType
    id: str
    tool: str
    result: dict[str, Any]


class Report(BaseModel):
    """The agent's final report (the ``finish`` tool's arguments)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    status: Literal["completed", "partial", "failed"]
    summary: str
    uncertain_actions: list[str]


class Finish(_Event):
    """The agent's final report."""

    type: FinishType
    id: str
    report: Report


class FaultEvent(_Event):
    """A fault fired on the focal write, with what it will do (mode-specific ``detail``)."""

    type: FaultType
    mode: str
    request_id: str
    detail: dict[str, Any]


class Commit(_Event):
    """An effect committed (``seq`` indexes the ledger)."""

    type: CommitType
    seq: int = Field(ge=0)
    tool: str
    request_id: str
    attempt: Attempt
    object_id: str | None


class Arrival(_Event):
    """A delayed or redelivered request reached its service, and what it did there."""

    type: ArrivalType
    request_id: str
    attempt: Attempt
    tool: str
    outcome: Literal["committed", "replayed", "rejected", "no_effect"]


class Replay(_Event):
    """An idempotency key answered a request without acting."""

    type: ReplayType
    request_id: str
    attempt: Attempt
    key: str


class LaggedRead(_Event):
    """A lagging or stale read could not see effects that had committed (ledger ``seq``s)."""

    type: LaggedReadType
    tool: str
    request_id: str
    horizon: float
    hidden: list[int]


class ConditionEvent(_Event):
    """A scaffold condition acted (retried, read back, told the model). Each action carries
    its own fields (``tool``, ``attempt``, ``visible``, ...), and a plugin condition may log its
    own, so fields beyond ``name`` and ``action`` are open."""

    model_config = ConfigDict(extra="allow")

    type: ConditionType
    name: str
    action: str


class GuardEvent(_Event):
    """A guard decision: which of its steps decided what, for whom."""

    type: GuardType
    step: int
    action: str
    caller: str
    tool: str
    key: str | None
    detail: dict[str, Any]


class Clock(_Event):
    """The clock advanced for the agent's ``wait`` or for settling after the episode."""

    type: ClockType
    reason: Literal["wait", "settle"]
    seconds: float = Field(ge=0)


class Limit(_Event):
    """Something other than the agent's ``finish`` ended the episode."""

    type: LimitType
    reason: Termination


EVENT_MODELS: tuple[type[_Event], ...] = (Turn, Call, ResultEvent, Finish, FaultEvent, Commit,
                                          Arrival, Replay, LaggedRead, ConditionEvent, GuardEvent,
                                          Clock, Limit)

Event = Annotated[Turn | Call | ResultEvent | Finish | FaultEvent | Commit | Arrival | Replay
                  | LaggedRead | ConditionEvent | GuardEvent | Clock | Limit,
                  Field(discriminator="type")]
"""Any event, told apart by its ``type``."""


def _type_of(model: type[_Event]) -> str:
    (name,) = get_args(model.model_fields["type"].annotation)
    return str(name)


BY_TYPE: dict[str, type[_Event]] = {_type_of(m): m for m in EVENT_MODELS}


def _names(model: type[_Event]) -> tuple[frozenset[str], frozenset[str] | None]:
    """(required field names, allowed field names or ``None`` when open), ``t`` and ``type``
    left out (``emit`` sets them)."""
    fields = {n: f for n, f in model.model_fields.items() if n not in ("t", "type")}
    allowed = None if model.model_config.get("extra") == "allow" else frozenset(fields)
    return frozenset(n for n, f in fields.items() if f.is_required()), allowed


_FIELDS = {name: _names(model) for name, model in BY_TYPE.items()}


class EventLog:
    """An append-only list of events stamped with the sim time."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.events: list[dict[str, Any]] = []

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one event. An unknown type, or field names its model does not have, is a
        bug in the sandbox or a plugin: :class:`InfraError` (the episode ends as
        ``infra_error``), never a record that the schema would refuse."""
        names = _FIELDS.get(type_)
        if names is None:
            raise InfraError(f"unknown event type {type_!r}; the event types are "
                             f"{', '.join(sorted(EVENT_TYPES))}")
        required, allowed = names
        keys = fields.keys()
        if not required <= keys or (allowed is not None and not keys <= allowed):
            raise InfraError(f"{type_} event with fields {sorted(keys)}; limbo.sim.events."
                             f"{BY_TYPE[type_].__name__} needs {sorted(required)}")
        event = {"t": self.env.now, "type": type_, **fields}
        self.events.append(event)
        return event
