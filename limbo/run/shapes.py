"""A cell's shape: the conversation a reference policy has in it, offline — the yardstick the
forecast (:mod:`limbo.run.forecast`) scales a model's observed episodes by.

What an episode of a real model costs depends mostly on its cell: the task's steps, the fault
(a timeout invites a retry or a read-back), the condition (a longer prompt, a scaffold's extra
turn), the toolset. A reference policy runs any cell in milliseconds, offline, and its
conversation has the same system prompt, tools and tool results a model would see, turn after
turn. So each cell's shape — the calls ``policy/verify`` makes in it, and the tokens of their
input (the whole conversation so far, plus the tools) and output, counted as characters / 4
— says how that cell compares with another. A real model takes more or fewer turns and
words; the forecast learns by how much from episodes it observed.

The shape also holds the first call's conversation, exactly what the model is asked first in
that cell: with it the forecast asks the response cache whether the cell would be answered
from it (:meth:`limbo.providers.base.ProviderAdapter.cache_key`).

A cell whose harness starts a real process (a production harness) has no shape here.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from limbo.episode.briefing import ReferenceAdapter, ReferenceContext, brief
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelTurn,
    ToolDef,
    make_adapter,
)
from limbo.run.kinds import harness_median
from limbo.sim.cell import Cell

YARDSTICK = "policy/verify"
"""The reference policy whose conversation is a cell's shape."""
CHARS_PER_TOKEN = 4
SHAPE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Shape:
    """The conversation ``policy/verify`` has in a cell."""

    calls: int
    input_tokens: int
    output_tokens: int
    first: tuple[tuple[Message, ...], tuple[ToolDef, ...]] | None
    """The first call's conversation and tools (``None``: no call was made)."""

    def usd(self, price: dict[str, float] | None) -> float | None:
        """What these tokens cost at ``price`` (USD per million; ``None``: unknown)."""
        if price is None:
            return None
        return (self.input_tokens * price["input"] + self.output_tokens * price["output"]) / 1e6


class _Measuring(ReferenceAdapter):
    """``policy/verify``, counting what it is asked and what it answers."""

    def __init__(self) -> None:
        super().__init__("shape")
        self.policy = make_adapter(YARDSTICK)
        self.calls = self.input_chars = self.output_chars = 0
        self.first: tuple[tuple[Message, ...], tuple[ToolDef, ...]] | None = None
        self.tool_chars: dict[int, int] = {}

    def brief(self, key: ReferenceContext) -> None:
        super().brief(key)
        brief(self.policy, key)

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        if self.first is None:
            self.first = (tuple(m.model_copy(deep=True) for m in messages), tuple(tools))
        self.calls += 1
        self.input_chars += sum(_chars(m) for m in messages) + self._tools(tools)
        turn: ModelTurn = await self.policy.generate(messages, tools, ctx)
        self.output_chars += len(turn.text or "") + sum(
            len(c.name) + len(_text(c.arguments)) for c in turn.tool_calls)
        return turn

    def _tools(self, tools: list[ToolDef]) -> int:
        """The characters of a toolset's definitions (once per toolset: they are sent with
        every call)."""
        key = id(tools)
        if key not in self.tool_chars:
            self.tool_chars[key] = len(json.dumps([t.model_dump() for t in tools]))
        return self.tool_chars[key]


def _text(arguments: object) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _chars(m: Message) -> int:
    return len(m.content or "") + sum(len(c.name) + len(_text(c.arguments))
                                      for c in m.tool_calls)


async def shape_of(cell: Cell) -> Shape | None:
    """``cell``'s shape; ``None`` for a cell whose harness is a real process, or one the
    yardstick could not run."""
    from limbo.episode.run_one import arun_episode
    if harness_median(cell.harness) is not None:
        return None
    measured = _Measuring()
    record = await arun_episode(cell, measured, timeout=SHAPE_TIMEOUT_S)
    if record["outcome"]["termination"] in ("infra_error", "timeout") or not measured.calls:
        return None
    return Shape(measured.calls, measured.input_chars // CHARS_PER_TOKEN,
                 measured.output_chars // CHARS_PER_TOKEN, measured.first)


def shapes(cells: list[Cell]) -> list[Shape | None]:
    """The shapes of ``cells``, one after another (each takes milliseconds)."""

    async def all_of() -> list[Shape | None]:
        return [await shape_of(cell) for cell in cells]

    return asyncio.run(all_of())
