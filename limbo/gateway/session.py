"""One episode's view of the gateway: which adapter answers, with which episode context, and
what happened (every request and turn, for the episode record).

Each request is a model turn — except an exact repeat of the previous request (a harness
retrying after a dropped or cut-off answer), which gets the same turn again without asking the
adapter twice: a reference policy is a script, and advancing it on a retry would skip a step.

Hooks let the runner that owns the world tie turns to it: ``before_turn(messages, tools)``
(advance the sim clock by the think time, enforce limits; return a turn to answer with instead —
a stop at a limit, or a canned reply to a harness's side request such as a title generation,
which must not advance a reference policy) and ``after_turn(turn)`` (record usage and cost).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from limbo.base.hashing import digest
from limbo.base.secrets import scrub
from limbo.episode.models import EpisodeContext, Message, ModelAdapter, ModelTurn, ToolDef
from limbo.gateway.naming import ToolNames


class GatewayError(Exception):
    """The gateway cannot answer for this session (misconfigured, or the adapter failed)."""


@dataclass
class GatewaySession:
    episode: str
    adapter: ModelAdapter
    ctx: EpisodeContext | None = None
    before_turn: Callable[[list[Message], list[ToolDef]], ModelTurn | None] | None = None
    after_turn: Callable[[ModelTurn], None] | None = None
    servers: tuple[str, ...] = ("sandbox",)
    """MCP server names whose tool-name prefixes are stripped for the adapter."""
    requests: int = 0
    """HTTP requests received (retries and failed ones included)."""
    turns: int = 0
    """Turns the adapter answered."""
    log: list[dict[str, Any]] = field(default_factory=list)
    """One entry per request: number, API, stream, what was answered (never any header)."""
    errors: list[str] = field(default_factory=list)
    model_errors: int = 0
    """How many of ``errors`` were the model's (the adapter gave up: ``ModelError``)."""
    on_model_error: Callable[[str], None] | None = None
    """Called with the reason when the adapter gives up (the runner ends the episode)."""
    _memo: tuple[str, ModelTurn] | None = None

    def next_request(self) -> int:
        self.requests += 1
        return self.requests

    async def answer(self, messages: list[Message], tools: list[ToolDef]) -> ModelTurn:
        """The turn for a parsed request, in the request's own tool names."""
        names = ToolNames([t.name for t in tools], self.servers)
        messages, tools = names.messages_in(messages), names.tools_in(tools)
        key = digest([[m.model_dump(mode="json") for m in messages],
                      [t.model_dump(mode="json") for t in tools]], 32)
        if self._memo is not None and self._memo[0] == key:
            return names.turn_out(self._memo[1])
        if self.ctx is None:
            raise GatewayError(f"session {self.episode} has no episode context yet")
        turn = self.before_turn(messages, tools) if self.before_turn else None
        if turn is None:
            turn = await self.adapter.generate(messages, tools, self.ctx)
            self.turns += 1
        if self.after_turn:
            self.after_turn(turn)
        self._memo = (key, turn)
        return names.turn_out(turn)

    def record(self, n: int, api: str, stream: bool, **what: Any) -> None:
        """Log one request (credentials masked: the log may go into an episode record)."""
        entry = {"request": n, "api": api, "stream": stream, **what}
        self.log.append(json.loads(scrub(json.dumps(entry))))

    def fail(self, reason: str, model: bool = False) -> None:
        self.errors.append(scrub(reason))
        if model:
            self.model_errors += 1
            if self.on_model_error is not None:
                self.on_model_error(scrub(reason))
