"""The sandbox as an MCP server: one episode's tools, served with the ``mcp`` SDK.

The server offers the world's tools with their contract descriptions and argument schemas and
runs every call through :class:`~limbo.harnesses.toolcalls.ToolCalls` — the condition's tool
layer (the guard included), the boundary and its faults — exactly as the minimal loop does. A
result the agent should see as an error (``ok: false``) is an MCP tool error (``isError``) whose
text is the same structured JSON, so a model reads the same ``kind`` under every harness.

**Real timeouts.** A call whose result is a timeout is held, in wall time, for ``hold_s``
(longer than the client's own tool timeout) before it is answered, so the client gives up and
shows the model its own timeout text. The sim clock already recorded the fault's 30 s, and
what commits was decided in sim time before the hold started: a client that cancels the call
changes nothing in the world.

The episode's world is touched only by the handlers, which run on the event loop serving them;
nothing is kept in MCP sessions (harnesses speak protocol versions with and without them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.episode.condition import Condition
from limbo.episode.harness import LoopResult
from limbo.harnesses.toolcalls import ToolCalls, refused
from limbo.sim.events import Termination
from limbo.sim.results import Result, error_kind
from limbo.sim.world import World

NAME = "sandbox"
"""The server's name: harnesses prefix its tools with it (``mcp__sandbox__…``, ``sandbox-…``)."""
CALL_ID_META = ("callId", "claudecode/toolUseId")
"""``_meta`` keys under which clients send the model's own id for a call (Codex, Claude Code)."""


def task_text(world: World, condition: Condition) -> str:
    """What the agent is asked: the condition's instructions, then the task."""
    return f"{condition.system_prompt().strip()}\n\n{world.prompt().strip()}\n"


class EpisodeServer:
    """The MCP server of one episode. ``on_end(reason)`` is called once when a call ends the
    episode (``finish``, or a limit)."""

    def __init__(self, world: World, condition: Condition, out: LoopResult, *,
                 hold_s: float | None = None,
                 on_end: Callable[[Termination], None] | None = None) -> None:
        try:
            import mcp_types as types
            from mcp.server import Server
        except ImportError:
            raise UsageError("the sandbox's MCP server needs the mcp SDK: "
                             "pip install 'limbo-bench[mcp]'") from None

        self.world, self.out, self.hold_s, self.on_end = world, out, hold_s, on_end
        self.calls = ToolCalls(world, condition, out)
        self.ended: Termination | None = None
        self.prompt = task_text(world, condition)
        self._n = 0
        self._holding = 0
        self._released = asyncio.Event()
        self._types = types
        self.server = Server(NAME, version=__version__, instructions=self.prompt,
                             on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                             on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    # -- handlers ------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        t = self._types
        return t.ListToolsResult(tools=[
            t.Tool(name=s.name, description=s.description, input_schema=s.schema())
            for s in self.world.specs.values()])

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        call_id = self._call_id(getattr(ctx, "meta", None))
        if self.ended is not None:
            return self._answer(refused(self.ended), None)
        handled = self.calls.call(call_id, params.name, params.arguments or {})
        if handled.stop is not None:
            self._end(handled.stop)
        result = handled.result if handled.result is not None else refused(str(handled.stop))
        if self.hold_s and error_kind(result) == "timeout":
            await self._hold()
        return self._answer(result, handled.note)

    async def _hold(self) -> None:
        """Keep a timed-out call open past the client's own timeout (or until released): the
        client gives up and tells its model so. The world was settled before the hold."""
        self._holding += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), self.hold_s)
        finally:
            self._holding -= 1

    async def release(self, wait_s: float = 2.0) -> None:
        """Answer every held call now (the episode is over), and give them ``wait_s`` to go."""
        self._released.set()
        for _ in range(int(wait_s / 0.01)):
            if not self._holding:
                return
            await asyncio.sleep(0.01)

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        t = self._types
        return t.ListPromptsResult(prompts=[t.Prompt(name="task", description=(
            "The instructions and the task of this episode"))])

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        t = self._types
        return t.GetPromptResult(messages=[t.PromptMessage(
            role="user", content=t.TextContent(text=self.prompt))])

    # -- helpers -------------------------------------------------------------------------------

    def _call_id(self, meta: Any) -> str:
        """The model's id for the call when the client sends it, else a counter."""
        self._n += 1
        for key in CALL_ID_META:
            value = (meta or {}).get(key)
            if isinstance(value, str) and 0 < len(value) <= 200:
                return value
        return f"mcp_{self._n}"

    def _end(self, reason: Termination) -> None:
        if self.ended is None:
            self.ended = reason
            if self.on_end is not None:
                self.on_end(reason)

    def _answer(self, result: Result, note: str | None) -> Any:
        t = self._types
        content = [t.TextContent(text=json.dumps(result, ensure_ascii=False))]
        if note:
            content.append(t.TextContent(text=note))
        return t.CallToolResult(content=content, is_error=not result.get("ok"))


class HttpEndpoint:
    """An MCP server as an ASGI app (streamable HTTP, JSON answers), for a loopback server. Use as an async context manager: the SDK's session manager runs while inside."""

    def __init__(self, server: Any) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        loopback = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])
        # Sessions for the clients of the handshake era (Codex, Hermes): a session serves its
        # requests without setting up a server per request (measured: 1.2 ms per call against
        # 1.5 ms stateless). Clients of the per-request era never open one.
        self.manager = StreamableHTTPSessionManager(server, json_response=True,
                                                    security_settings=loopback)
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> HttpEndpoint:
        await self._stack.enter_async_context(_running(self.manager))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("method") in ("GET", "HEAD"):
            # No server-to-client stream to offer (nothing is ever pushed): say so at once, as
            # the protocol allows. Served, the stream stays open and a client probing the URL
            # with a GET (Hermes does, with a 5 s timeout) waits for nothing.
            await send({"type": "http.response.start", "status": 405,
                        "headers": [(b"allow", b"POST, DELETE"), (b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.manager.handle_request(scope, receive, send)


@contextlib.asynccontextmanager
async def _running(manager: Any) -> AsyncIterator[None]:
    """Run ``manager`` in a task of its own: its task group must be entered and left by one
    task, while the caller may leave from another point of its own code."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def main() -> None:
        async with manager.run():
            started.set()
            await stop.wait()

    task = asyncio.create_task(main())
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiter.cancel()
        task.result()  # raises why it could not start
    try:
        yield
    finally:
        stop.set()
        await task
