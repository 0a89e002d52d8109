"""What every harness does with one tool call the agent made (and records of one model turn),
whoever carries the agent.

The minimal loop calls it directly; the MCP server calls it for a production harness or any
MCP client. Either way the same things happen in the same order: ``finish`` takes the report;
the tool-call limit is checked; the call goes through the condition's tool layer to the
boundary; ``call`` and ``result`` are logged; the condition may add a note for the model; and
the sim-time limit is checked. So an episode's record does not depend on which harness carried
the agent, only on what the agent did.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from limbo.base.hashing import plain_json
from limbo.episode.condition import Condition, ToolLayer
from limbo.episode.harness import LoopResult
from limbo.episode.models import ModelTurn, ToolDef
from limbo.log.records import Usage
from limbo.sim.events import Termination
from limbo.sim.results import Result, error
from limbo.sim.world import World

MAX_LOGGED_ARGS = 4000
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
"""Built once: ``json.dumps`` with options builds an encoder per call, and every call is logged."""


class BoundaryLayer:
    """The innermost tool layer: straight to the world's boundary."""

    def __init__(self, world: World) -> None:
        self.world = world

    def call(self, name: str, args: Any) -> Result:
        return self.world.call(name, args)


def loggable_name(name: str) -> str:
    """A tool name as logged: a model that invents a huge name cannot bloat the record."""
    return name if len(name) <= 200 else f"{name[:80]}...(+{len(name) - 80} chars)"


def loggable(args: Any) -> Any:
    """Arguments as logged: huge payloads are summarised, never dropped silently. A dict
    holding NaN or Infinity is logged as its JSON-like text, so the record stays strict JSON
    (and a replay sends that text, which the boundary refuses the same way)."""
    if isinstance(args, str):
        text = args
    elif type(args) is dict and _surely_short(args):
        return args
    else:
        try:
            text = _STRICT.encode(args)
        except ValueError:
            text = args = plain_json(args)
    if len(text) <= MAX_LOGGED_ARGS:
        return args
    return {"_truncated": text[:200], "_chars": len(text)}


def _surely_short(args: dict[Any, Any]) -> bool:
    """Whether ``args`` is one flat object of text, integers, flags and nulls whose JSON is
    surely within :data:`MAX_LOGGED_ARGS` — bounding each character by the six of its longest
    escape — so it is logged as it is without being encoded to measure it (nearly every call;
    no NaN can hide in it)."""
    budget = MAX_LOGGED_ARGS - 2
    for key, value in args.items():
        kind = type(value)
        if kind is str:
            size = len(value)
        elif (kind is int or kind is bool) and -_DIGITS < value < _DIGITS:
            size = 20
        elif value is None:
            size = 4
        else:
            return False
        if type(key) is not str:
            return False
        budget -= 6 * (len(key) + size) + 6  # quotes, colon, comma and space
        if budget < 0:
            return False
    return True


_DIGITS = 10**19


def tool_defs(world: World) -> list[ToolDef]:
    """The tools of ``world`` as a model is offered them (a new list of shared, frozen
    definitions: a toolset is built once per contract, so its definitions are too)."""
    tools = world.specs
    cached = _DEFS.get(id(tools))
    if cached is None or cached[0] is not tools:
        cached = (tools, tuple(ToolDef(name=s.name, description=s.description,
                                       parameters=s.schema()) for s in tools.values()))
        if len(_DEFS) >= 64:  # toolsets that are not the shared ones: keep few alive
            _DEFS.clear()
        _DEFS[id(tools)] = cached
    return list(cached[1])


_DEFS: dict[int, tuple[Mapping[str, Any], tuple[ToolDef, ...]]] = {}
"""Definitions by the identity of the toolset they were built from (kept alive with them, so
an id is never reused while its entry stands)."""


def account(world: World, out: LoopResult, turn: ModelTurn) -> None:
    """Record model turn ``out.turns``: its usage, and a ``turn`` event."""
    usage = turn.usage  # a plain Usage's fields are its __dict__: no serialiser needed
    out.usage.append({"turn": out.turns, **(usage.__dict__ if type(usage) is Usage
                                            else usage.model_dump())})
    world.emit("turn", n=out.turns, text=turn.text,
                   tools=[loggable_name(c.name) for c in turn.tool_calls])


@dataclass
class Handled:
    """The outcome of one call: the result the agent gets (``None`` when the call ended the
    episode before it ran), a note the condition adds, and the reason the episode must end."""

    result: Result | None
    note: str | None = None
    stop: Termination | None = None


class ToolCalls:
    """The agent-side tool handling of one episode; counts into ``out``."""

    def __init__(self, world: World, condition: Condition, out: LoopResult) -> None:
        self.world = world
        self.condition = condition
        self.out = out
        self.layer: ToolLayer = condition.wrap(BoundaryLayer(world), world)

    def call(self, call_id: str, name: str, args: Any) -> Handled:
        world, limits = self.world, self.world.cell.limits
        if name == "finish":
            checked = world.validate(name, args)
            if not isinstance(checked, dict):
                self.out.report = checked[1]
                world.emit("finish", id=call_id, report=checked[1])
                return Handled(ok_finish(), stop="finished")
            result = checked
        elif self.out.tool_calls >= limits.tool_calls:
            return Handled(None, stop="tool_limit")
        else:
            self.out.tool_calls += 1
            world.emit("call", id=call_id, tool=loggable_name(name), args=loggable(args))
            result = self.layer.call(name, args)
        world.emit("result", id=call_id, tool=loggable_name(name), result=result)
        note = self.condition.followup(name, result, world)
        stop: Termination | None = "time_limit" if world.now >= limits.agent_time_s else None
        return Handled(result, note, stop)


def end(world: World, out: LoopResult, reason: Termination, detail: str | None) -> LoopResult:
    """End the episode with ``reason`` unless something ended it already (the first end counts:
    a harness stopped for a limit must not become an infra error as it goes down)."""
    if out.termination == "finished":
        out.termination, out.reason = reason, detail
        world.emit("limit", reason=reason)
    out.agent_time_s = world.now
    return out


def ok_finish() -> Result:
    """What a harness that needs an answer to ``finish`` is told (the minimal loop ends)."""
    return {"ok": True, "finished": True}


def refused(reason: str) -> Result:
    """The answer to a call made after the episode ended (the agent kept going)."""
    return error("not_available", f"the episode is over ({reason}); no more tool calls run")
