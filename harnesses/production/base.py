"""What every production-harness driver shares.

One episode: a loopback server (the model gateway, with the episode's MCP server mounted at
``/ep/<episode>/mcp``) runs on the episode's event loop; the harness — the real, pinned CLI —
runs headless in a throw-away home directory (config, state and caches: never the user's),
with its tools from that MCP server and its model from that gateway; it is bounded in wall
time; its event stream and stderr tail are kept in the record's ``runtime`` (the field allowed to
differ between runs: they hold wall times and the harness's own ids).

Turns are tied to the world in the gateway's hooks: a request offering the sandbox's tools is a
model turn (it costs the think time and counts against the limits, as in the minimal loop); a
request without them is the harness's own side request (a title, a summary) and is answered
with a short text without consulting the model; after ``finish`` or a limit every request gets
a closing text, so the harness ends its run by itself.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from limbo.base.errors import InfraError
from limbo.episode.condition import Condition
from limbo.episode.harness import LoopResult
from limbo.episode.models import EpisodeContext, Message, ModelAdapter, ModelTurn, ToolDef
from limbo.gateway import Gateway, GatewaySession
from limbo.harnesses.mcp.server import EpisodeServer, HttpEndpoint, task_text
from limbo.harnesses.production import process
from limbo.harnesses.production.install import Install, harness_dir, status
from limbo.harnesses.toolcalls import account, end
from limbo.sim.events import Termination
from limbo.sim.world import World

SIDE_ANSWER = "Sandbox task"
CLOSING = "The task is over."
MODEL_NAME = "limbo-model"
KEY = "limbo-local-key"
"""What the harness sends as its API key: the gateway needs none (a real provider's key stays
with limbo's adapter and never reaches the harness)."""


@dataclass(frozen=True)
class Endpoints:
    """Where the harness finds its model and its tools for this episode."""

    openai: str
    """Base URL for OpenAI clients (``…/v1``)."""
    anthropic: str
    """Base URL for Anthropic clients (no ``/v1``)."""
    mcp: str


class ProductionHarness:
    """Base of the drivers; a subclass says how to install, configure and start its CLI."""

    install: ClassVar[Install]
    timeout_texts: ClassVar[tuple[str, ...]] = ()
    """Patterns of what the harness tells its model when a tool call times out."""
    tool_timeout_s: ClassVar[float] = 3.0
    """The MCP tool timeout configured in the harness; a timed-out call is held longer."""
    hold_margin_s: ClassVar[float] = 3.0
    wall_s: ClassVar[float] = 300.0
    """Wall-time bound of one harness run."""
    median_wall_s: ClassVar[float]
    """The median wall time of one episode of this pinned version, as measured (rounded up;
    docs/harnesses.md says how): what ``limbo run`` estimates a grid's harness episodes from
    before it starts them."""

    def __init__(self, world: World, adapter: ModelAdapter, condition: Condition,
                 ctx: EpisodeContext) -> None:
        self.world, self.adapter, self.condition, self.ctx = world, adapter, condition, ctx
        self.out = LoopResult()
        self._kill = asyncio.Event()
        self._real_turn = False
        self.server = EpisodeServer(world, condition, self.out,
                                    hold_s=self.tool_timeout_s + self.hold_margin_s,
                                    on_end=self._on_end)

    # -- availability and configuration (per harness) --------------------------------------------

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """Whether the pinned CLI is installed here, and where (or how to install it)."""
        return status(cls.install)

    @staticmethod
    def base() -> Path:
        """The directory the harnesses are installed in."""
        return harness_dir()

    def command(self, home: Path, prompt: str, at: Endpoints) -> tuple[list[str], dict[str, str]]:
        """argv and the harness-specific environment; write any config files under ``home``."""
        raise NotImplementedError

    # -- the protocol ---------------------------------------------------------------------------

    async def start(self) -> None:
        ok, detail = self.availability()
        if not ok:
            raise InfraError(f"harness {type(self).__name__}: {detail}")

    async def run(self) -> LoopResult:
        episode = self.world.cell.episode_id
        gateway = Gateway()
        await gateway.start()
        try:
            async with HttpEndpoint(self.server.server) as endpoint:
                session = gateway.open(episode, self.adapter, self.ctx,
                                       before_turn=self._before_turn, after_turn=self._after_turn,
                                       on_model_error=lambda why: self.stop("model_error", why))
                at = Endpoints(gateway.base_url(episode), gateway.base_url(episode, "anthropic"),
                               gateway.mount(episode, "mcp", endpoint))
                with tempfile.TemporaryDirectory(prefix=f"limbo-{self.world.cell.harness}-") as tmp:
                    outcome = await self._launch(Path(tmp), at, session)
                await self.server.release()
        finally:
            await gateway.stop()
        self._conclude(outcome, session)
        self.out.agent_time_s = self.world.now
        return self.out

    def stop(self, reason: Termination, detail: str | None = None) -> LoopResult:
        """End the episode with ``reason`` (the first stop counts) and the harness with it."""
        self._kill.set()
        return end(self.world, self.out, reason, detail)

    # -- internals ------------------------------------------------------------------------------

    async def _launch(self, tmp: Path, at: Endpoints, session: GatewaySession) -> process.ProcessOutcome:
        home, work = tmp / "home", tmp / "work"
        home.mkdir()
        work.mkdir()
        argv, extra = self.command(home, task_text(self.world, self.condition), at)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "LANG": "C.UTF-8", "TMPDIR": str(tmp), "NO_COLOR": "1", **extra}
        outcome = await process.run(argv, env, str(work), self.wall_s, self._kill)
        self.out.runtime["harness"] = {
            "name": type(self).__name__, "version": self.install.version,
            "exit_code": outcome.exit_code, "killed": outcome.killed,
            "events": outcome.events, "dropped_lines": outcome.dropped_lines,
            "stderr_tail": outcome.stderr_tail, "gateway": session.log,
        }
        return outcome

    def _ended(self) -> bool:
        return self.out.report is not None or self.server.ended is not None

    def _on_end(self, reason: Termination) -> None:
        if reason != "finished":
            self.stop(reason)

    def _conclude(self, outcome: process.ProcessOutcome, session: GatewaySession) -> None:
        """The termination, from what happened: a report, a limit or a model error stands
        (they were recorded as they happened); else a gateway that could not answer, a harness
        that overran, broke or never offered the tools, or one that simply stopped."""
        if self.out.termination != "finished" or self.out.report is not None:
            return
        tail = outcome.stderr_tail.strip()[-1500:]
        if session.errors:
            self.out.termination, self.out.reason = "infra_error", f"gateway: {session.errors[-1]}"
        elif outcome.killed and not self._kill.is_set():
            self.out.termination = "timeout"
            self.out.reason = f"harness {outcome.killed}; stderr: {tail}"
        elif outcome.exit_code != 0:
            self.out.termination = "infra_error"
            self.out.reason = f"harness {process.ended_how(outcome.exit_code)}; stderr: {tail}"
        elif self.out.turns == 0:
            self.out.termination = "infra_error"
            self.out.reason = (f"the harness never offered the sandbox's tools to its model "
                               f"({session.requests} model requests); stderr: {tail}")
        if self.out.termination != "finished":
            self.world.emit("limit", reason=self.out.termination)

    # -- gateway hooks ----------------------------------------------------------------------------

    def _before_turn(self, messages: list[Message], tools: list[ToolDef]) -> ModelTurn | None:
        self._real_turn = False
        if self._ended():
            return ModelTurn(text=CLOSING)
        if not any(t.name in self.world.specs for t in tools):
            return ModelTurn(text=SIDE_ANSWER)
        limits = self.world.cell.limits
        if self.out.turns >= limits.model_turns:
            self.stop("turn_limit")
            return ModelTurn(text=CLOSING)
        if self.world.now >= limits.agent_time_s:
            self.stop("time_limit")
            return ModelTurn(text=CLOSING)
        self.world.advance(self.world.cell.timing.think_s)
        self.out.turns += 1
        self._real_turn = True
        return None

    def _after_turn(self, turn: ModelTurn) -> None:
        if self._real_turn:
            account(self.world, self.out, turn)
            self._real_turn = False


def env_for_key(name: str) -> dict[str, Any]:
    """The (dummy) API key variable a harness reads."""
    return {name: KEY}
