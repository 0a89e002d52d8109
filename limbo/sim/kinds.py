"""The event log's closed sets — each event's ``type`` and each way an episode ends — with no
model behind them.

Why apart from :mod:`limbo.sim.events`: a reader of records (``limbo status``, the quick
verdicts of :mod:`limbo.log.shapes`) checks a line's event types and termination against these
sets and needs nothing else of the log's models; importing them through the models would cost
such a command pydantic and simpy, a fifth of ``limbo status`` on a large run. Each type is
named here once: an event model's ``type`` field is its alias below, and :data:`EventType` is
their union.
"""

from __future__ import annotations

from typing import Literal, get_args

Termination = Literal["finished", "turn_limit", "time_limit", "tool_limit", "model_error",
                      "infra_error", "timeout"]
"""Why an episode ended. ``finished``: the agent finished (or stopped calling tools);
``*_limit``: a cap of the cell's limits; ``model_error``: the provider failed after retries;
``infra_error``: a bug or broken invariant in the sandbox, an adapter or a harness;
``timeout``: the episode ran past its wall-clock limit."""

TERMINATIONS: tuple[str, ...] = get_args(Termination)

TurnType = Literal["turn"]
CallType = Literal["call"]
ResultType = Literal["result"]
FinishType = Literal["finish"]
FaultType = Literal["fault"]
CommitType = Literal["commit"]
ArrivalType = Literal["arrival"]
ReplayType = Literal["replay"]
LaggedReadType = Literal["lagged_read"]
ConditionType = Literal["condition"]
GuardType = Literal["guard"]
ClockType = Literal["clock"]
LimitType = Literal["limit"]

EventType = Literal[TurnType, CallType, ResultType, FinishType, FaultType, CommitType,
                    ArrivalType, ReplayType, LaggedReadType, ConditionType, GuardType,
                    ClockType, LimitType]
"""Every event's ``type``: the agent-visible ones (:data:`VISIBLE_TYPES`) and the hidden ones
share one ordered log."""

EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))
VISIBLE_TYPES: frozenset[str] = frozenset(get_args(Literal[TurnType, CallType, ResultType,
                                                           FinishType]))
"""What the agent saw happen: its turns and calls, the results it got, its report."""
