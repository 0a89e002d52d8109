"""The proxy's face to the agent: an MCP server (the ``mcp`` SDK's, as ``limbo mcp`` serves)
over stdio, or over streamable HTTP on loopback (``--listen PORT``).

It offers the upstream's tools exactly as the upstream lists them (names, descriptions,
schemas), plus LIMBO's ``finish`` (the agent's final report, which grading reads for
overclaiming) unless the upstream has a tool of that name; its instructions are the upstream's;
the task is the prompt ``task``. Each call goes to the :class:`~limbo.proxy.session.Session`.

The episode ends when the agent calls ``finish`` (over HTTP the server then stops; over stdio it
waits for the client to go), when a stdio client disconnects, or on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any

from limbo import __version__
from limbo.harnesses.mcp_server import CALL_ID_META, HttpEndpoint
from limbo.proxy.session import Session
from limbo.tools import UTILITY_TOOLS, FinishArgs

FINISH_GRACE_S = 0.5


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ProxyServer:
    """The MCP server of one proxied episode."""

    def __init__(self, session: Session, tools: list[Any], instructions: str | None,
                 prompt: str, name: str, announce: Callable[[str], None] = _stderr) -> None:
        import mcp_types as types
        from mcp.server import Server

        self.session, self.prompt, self.announce = session, prompt, announce
        self._types = types
        self.tools = list(tools)
        if not any(t.name == "finish" for t in tools):
            finish = next(s for s in UTILITY_TOOLS if s.name == "finish")
            self.tools.append(types.Tool(name="finish", description=finish.description,
                                         input_schema=FinishArgs.model_json_schema()))
        self.done = asyncio.Event()
        self._n = 0
        self.server = Server(name, version=__version__, instructions=instructions,
                             on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                             on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        return self._types.ListToolsResult(tools=self.tools)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        self._n += 1
        meta = getattr(ctx, "meta", None) or {}
        call_id = next((v for k in CALL_ID_META if isinstance(v := meta.get(k), str)
                        and 0 < len(v) <= 200), f"mcp_{self._n}")
        result = await self.session.call(params.name, dict(params.arguments or {}), call_id)
        if self.session.report is not None and params.name == "finish":
            self._finished()
        return result

    def _finished(self) -> None:
        if self.transport == "http":
            asyncio.get_running_loop().call_later(FINISH_GRACE_S, self.done.set)

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        t = self._types
        return t.ListPromptsResult(prompts=[t.Prompt(name="task", description=(
            "The task of this episode (what LIMBO grades the writes against)"))])

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        t = self._types
        return t.GetPromptResult(messages=[t.PromptMessage(
            role="user", content=t.TextContent(text=self.prompt))])

    # -- serving ------------------------------------------------------------------------------

    transport = "stdio"

    async def serve(self, port: int | None) -> None:
        """Serve until the episode ends (``port``: HTTP on 127.0.0.1, else stdio)."""
        self.transport = "stdio" if port is None else "http"
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.done.set)
        try:
            await (self._stdio() if port is None else self._http(port))
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    async def _stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        self.announce("limbo proxy: serving the episode on stdio")
        async with stdio_server() as (read, write):
            serving = asyncio.ensure_future(
                self.server.run(read, write, self.server.create_initialization_options()))
            ended = asyncio.ensure_future(self.done.wait())
            await asyncio.wait({serving, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if not serving.done():
                serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving

    async def _http(self, port: int) -> None:
        from limbo.gateway.asgi import LoopbackServer

        async with HttpEndpoint(self.server) as endpoint:
            host = LoopbackServer(endpoint, port=port)
            await host.start()
            try:
                self.announce(f"limbo proxy: serving the episode at {host.url}/mcp")
                await self.done.wait()
            finally:
                await host.stop()
