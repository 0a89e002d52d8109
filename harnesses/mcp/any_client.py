"""The harness for an agent that is any MCP client: serve the episode, wait for the client.

``limbo mcp`` runs one cell this way. The episode's MCP server (the same tool layer, boundary
and faults as every harness) is served over stdio or streamable HTTP on loopback; the client's
model is its own business, so the record has no model turns and the sim clock moves only with
tool calls and waits. The episode ends when the client calls ``finish`` (HTTP: the server then
stops), when it closes the connection (stdio), or on SIGINT/SIGTERM — and is then settled,
graded and recorded like any other.

Without a gateway there is no harness tool timeout to beat, so a timed-out call is answered at
once with the sandbox's ``timeout`` result, unless ``hold_s`` asks to hold it in wall time (to
test a client's own timeout handling).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any, Literal, cast

from limbo.base.errors import InfraError
from limbo.episode.condition import Condition
from limbo.episode.harness import LoopResult
from limbo.episode.models import EpisodeContext, Message, ModelAdapter, ModelTurn, ToolDef
from limbo.gateway.asgi import LoopbackServer
from limbo.harnesses.mcp.server import EpisodeServer, HttpEndpoint
from limbo.harnesses.toolcalls import end
from limbo.sim.events import Termination
from limbo.sim.world import World

Transport = Literal["stdio", "http"]
FINISH_GRACE_S = 0.5
"""After ``finish`` over HTTP: time for the answer to reach the client before the server stops."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ExternalAgent(ModelAdapter):
    """Stands for the model of an outside MCP client: limbo never asks it anything."""

    provider = "external"
    offline = True

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        raise InfraError("the agent of this episode is an external MCP client")


class ServedEpisode:
    """Implements :class:`limbo.episode.harness.Harness` by serving the episode to one MCP client."""

    def __init__(self, world: World, adapter: ModelAdapter, condition: Condition,
                 ctx: EpisodeContext, *, transport: Transport = "stdio", port: int = 0,
                 hold_s: float | None = None, announce: Callable[[str], None] = _stderr) -> None:
        self.world, self.transport, self.port, self.announce = world, transport, port, announce
        self.out = LoopResult()
        self.server = EpisodeServer(world, condition, self.out, hold_s=hold_s,
                                    on_end=self._on_end)
        self._done = asyncio.Event()

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """Always runnable: the agent is whatever MCP client connects (``limbo mcp``)."""
        return True, "serves the episode to an external MCP client"

    async def start(self) -> None:
        """Nothing to start before serving."""

    async def run(self) -> LoopResult:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._done.set)
        try:
            await (self._stdio() if self.transport == "stdio" else self._http())
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        self.out.agent_time_s = self.world.now
        return self.out

    def stop(self, reason: Termination, detail: str | None = None) -> LoopResult:
        self._done.set()
        return end(self.world, self.out, reason, detail)

    def _on_end(self, reason: Termination) -> None:
        if reason != "finished":
            self.stop(reason)
        elif self.transport == "http":
            asyncio.get_running_loop().call_later(FINISH_GRACE_S, self._done.set)

    async def _stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        from limbo.harnesses.mcp.stdio import CheckedLines

        mcp = self.server.server
        self.announce("limbo mcp: serving the episode on stdio")
        lines = CheckedLines()  # every line gets an answer, as over HTTP
        async with stdio_server(stdin=cast(Any, lines)) as (read, write):
            lines.answer_with(write.send)
            serving = asyncio.ensure_future(
                mcp.run(read, write, mcp.create_initialization_options()))
            ended = asyncio.ensure_future(self._done.wait())
            await asyncio.wait({serving, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            await self.server.release()
            if not serving.done():
                serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving

    async def _http(self) -> None:
        async with HttpEndpoint(self.server.server) as endpoint:
            host = LoopbackServer(endpoint, port=self.port)
            await host.start()
            try:
                self.announce(f"limbo mcp: serving the episode at {host.url}/mcp")
                await self._done.wait()
                await self.server.release()
            finally:
                await host.stop()
