"""The minimal harness: our own agent loop.

System prompt (from the condition) and task, then model turn → tool calls through the tool
layer → results → … until ``finish`` or a limit. Parallel tool calls in one turn run in the
order given. Each model turn costs the think time on the sim clock.
"""

from __future__ import annotations

from typing import Any

from limbo.base.hashing import plain_json
from limbo.episode.condition import Condition
from limbo.episode.harness import LoopResult, harness
from limbo.episode.models import EpisodeContext, Message, ModelAdapter
from limbo.harnesses.toolcalls import ToolCalls, account, tool_defs
from limbo.sim.events import Termination
from limbo.sim.world import World


@harness("minimal")
class MinimalHarness:
    """LIMBO's own agent loop, in this process: one model turn, its tool calls, and so on.

    Implements :class:`limbo.episode.harness.Harness` for one episode's ``world``."""

    def __init__(self, world: World, adapter: ModelAdapter, condition: Condition,
                 ctx: EpisodeContext) -> None:
        self.world = world
        self.adapter = adapter
        self.condition = condition
        self.ctx = ctx
        self.out = LoopResult()
        self.tools = ToolCalls(world, condition, self.out)

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
            world.advance(world.cell.timing.think_s)
            self.out.turns += 1
            turn = await self.adapter.generate(messages, tools, self.ctx)
            account(world, self.out, turn)
            messages.append(Message(role="assistant", content=turn.text or "",
                                    tool_calls=turn.tool_calls))
            if not turn.tool_calls:
                break
            for call in turn.tool_calls:
                if not self._call(call.id, call.name, call.arguments, messages):
                    break
        self.out.agent_time_s = world.now
        return self.out

    def _call(self, call_id: str, name: str, args: Any, messages: list[Message]) -> bool:
        """Execute one tool call; False when the episode should stop."""
        handled = self.tools.call(call_id, name, args)
        if handled.stop == "finished":
            return False
        if handled.result is not None:
            messages.append(Message(role="tool", tool_call_id=call_id, name=name,
                                    content=plain_json(handled.result)))
        if handled.note:
            messages.append(Message(role="user", content=handled.note))
        if handled.stop is not None:
            self.stop(handled.stop)
            return False
        return True

    def stop(self, reason: Termination, detail: str | None = None) -> LoopResult:
        self.out.termination = reason
        self.out.reason = detail
        self.world.emit("limit", reason=reason)
        self.out.agent_time_s = self.world.now
        return self.out
