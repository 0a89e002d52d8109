"""The minimal harness: our own agent loop.

System prompt (from the condition) and task, then model turn → tool calls through the tool
layer → results → … until ``finish`` or a limit. Parallel tool calls in one turn run in the
order given. Each model turn costs the think time on the sim clock.
"""

from __future__ import annotations

import json
from typing import Any

from limbo.adapter import EpisodeContext, Message, ModelAdapter, ModelTurn, ToolDef
from limbo.harness import LoopResult, Termination, harness
from limbo.harnesses.conditions import Condition, ToolLayer
from limbo.results import Result
from limbo.world import World

MAX_LOGGED_ARGS = 4000


class BoundaryLayer:
    """The innermost tool layer: straight to the world's boundary."""

    def __init__(self, world: World) -> None:
        self.world = world

    def call(self, name: str, args: Any) -> Result:
        return self.world.boundary.call(name, args)


def tool_defs(world: World) -> list[ToolDef]:
    return [ToolDef(name=s.name, description=s.description, parameters=s.schema())
            for s in world.tools.values()]


def loggable_name(name: str) -> str:
    """A tool name as logged: a model that invents a huge name cannot bloat the record."""
    return name if len(name) <= 200 else f"{name[:80]}...(+{len(name) - 80} chars)"


def loggable(args: Any) -> Any:
    """Arguments as logged: huge payloads are summarised, never dropped silently. A dict
    holding NaN or Infinity is logged as its JSON-like text, so the record stays strict JSON
    (and a replay sends that text, which the boundary refuses the same way)."""
    if isinstance(args, str):
        text = args
    else:
        try:
            text = json.dumps(args, ensure_ascii=False, allow_nan=False)
        except ValueError:
            text = args = json.dumps(args, ensure_ascii=False)
    if len(text) <= MAX_LOGGED_ARGS:
        return args
    return {"_truncated": text[:200], "_chars": len(text)}


@harness("minimal")
class MinimalHarness:
    """Runs one episode's agent loop against ``world`` (implements :class:`limbo.harness.Harness`)."""

    def __init__(self, world: World, adapter: ModelAdapter, condition: Condition,
                 ctx: EpisodeContext) -> None:
        self.world = world
        self.adapter = adapter
        self.condition = condition
        self.ctx = ctx
        self.layer: ToolLayer = condition.wrap(BoundaryLayer(world), world)
        self.out = LoopResult()

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """Always available: the loop is part of LIMBO."""
        return True, "built in"

    async def start(self) -> None:
        """Nothing to start: the loop runs in this process."""

    def opening(self) -> list[Message]:
        """The conversation before the first turn: the condition's prompt, then the task."""
        return [Message(role="system", content=self.condition.system_prompt()),
                Message(role="user", content=self.world.prompt())]

    async def run(self) -> LoopResult:
        world, limits = self.world, self.world.cell.limits
        messages = self.opening()
        tools = tool_defs(world)
        while self.out.termination == "finished" and self.out.report is None:
            if self.out.turns >= limits.model_turns:
                return self.stop("turn_limit")
            if world.now >= limits.agent_time_s:
                return self.stop("time_limit")
            world.env.run(until=world.now + world.cell.timing.think_s)
            self.out.turns += 1
            turn = await self.adapter.generate(messages, tools, self.ctx)
            self._account(turn)
            messages.append(Message(role="assistant", content=turn.text or "",
                                    tool_calls=turn.tool_calls))
            if not turn.tool_calls:
                break
            for call in turn.tool_calls:
                if not self._call(call.id, call.name, call.arguments, messages):
                    break
        self.out.agent_time_s = world.now
        return self.out

    def _account(self, turn: ModelTurn) -> None:
        usage = turn.usage.model_dump()
        self.out.usage.append({"turn": self.out.turns, **usage})
        self.world.log.emit("turn", n=self.out.turns, text=turn.text,
                            tools=[loggable_name(c.name) for c in turn.tool_calls])

    def _call(self, call_id: str, name: str, args: Any, messages: list[Message]) -> bool:
        """Execute one tool call; False when the episode should stop."""
        world, limits = self.world, self.world.cell.limits
        log = world.log
        if name == "finish":
            checked = world.boundary.validate(name, args)
            if not isinstance(checked, dict):
                self.out.report = checked[1]
                log.emit("finish", id=call_id, report=checked[1])
                return False
            result = checked
        elif self.out.tool_calls >= limits.tool_calls:
            self.stop("tool_limit")
            return False
        else:
            self.out.tool_calls += 1
            log.emit("call", id=call_id, tool=loggable_name(name), args=loggable(args))
            result = self.layer.call(name, args)
        log.emit("result", id=call_id, tool=loggable_name(name), result=result)
        messages.append(Message(role="tool", tool_call_id=call_id, name=name,
                                content=json.dumps(result, ensure_ascii=False)))
        note = self.condition.followup(name, result, world)
        if note:
            messages.append(Message(role="user", content=note))
        if world.now >= limits.agent_time_s:
            self.stop("time_limit")
            return False
        return True

    def stop(self, reason: Termination, detail: str | None = None) -> LoopResult:
        self.out.termination = reason
        self.out.reason = detail
        self.world.log.emit("limit", reason=reason)
        self.out.agent_time_s = self.world.now
        return self.out
