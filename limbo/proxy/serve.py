"""The proxy's face to the agent: MCP over stdio (the lean channel of :mod:`limbo.proxy.wire`),
or over streamable HTTP on loopback (``--listen PORT``: the lean endpoint of
:mod:`limbo.proxy.http`).

It offers the upstream's tools exactly as the upstream lists them (names, descriptions,
schemas), plus LIMBO's ``finish`` (the agent's final report, which grading reads for
overclaiming) unless the upstream has a tool of that name; its instructions are the upstream's;
the task is the prompt ``task``, beside the upstream's own prompts (unless one of them is named
``task``). The upstream's resources and prompts are relayed as they are, unlogged. Each tool
call goes to the :class:`~limbo.proxy.session.Session`.
Both ways the proxy speaks the ``initialize`` handshake (every protocol version of that era; a
client that probes for the stateless era first is told there is none, and falls back).

The episode ends when the agent calls ``finish``, when a stdio client disconnects, on
SIGINT/SIGTERM, or when the proxy itself fails (a bug: the episode is recorded as
``infra_error``). Its record is then written while the proxy still serves (a call is refused:
the episode is over); then over HTTP the server stops, over stdio it waits for the client to
go. A signal after the end abandons the writes still scheduled (they are never sent) and stops
the proxy once the record is written.

Nothing but ``initialize``, ``ping`` and the stateless era's probe is answered before the
agent's ``initialize``: a tool call sent first never reaches the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Collection, Iterator
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from limbo import __version__
from limbo.harnesses.mcp.server import CALL_ID_META
from limbo.proxy.channel import Channel
from limbo.proxy.session import Session
from limbo.proxy.upstream import RELAYED
from limbo.proxy.wire import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OPEN_METHODS,
    RpcError,
)
from limbo.sim.tools import UTILITY_TOOLS, FinishArgs

PARAMS = {"prompts/get": ("name", "arguments"), "resources/read": ("uri",)}
"""What of a relayed request's params goes upstream (a listing: its ``cursor``). Not ``_meta``:
the agent's protocol era may not be the upstream's (a request in the stateless era's envelope
is refused by a server of the handshake era)."""
TASK_PROMPT = {"name": "task",
               "description": "The task of this episode (what LIMBO grades the writes against)"}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def finish_tool() -> dict[str, Any]:
    spec = next(s for s in UTILITY_TOOLS if s.name == "finish")
    return {"name": "finish", "description": spec.description,
            "inputSchema": FinishArgs.model_json_schema()}


class ProxyServer:
    """The MCP server of one proxied episode."""

    def __init__(self, session: Session, tools: list[dict[str, Any]], prompts: Collection[str],
                 prompt: str, announce: Callable[[str], None] = _stderr) -> None:
        """``tools``, ``prompts``: what the upstream lists (its prompts by name)."""
        self.session, self.prompt, self.announce = session, prompt, announce
        upstream = session.upstream
        self.instructions = upstream.instructions
        self.info = {"name": upstream.name or "limbo-proxy",
                     "version": upstream.version or __version__}
        """The upstream's name and version, passed on (LIMBO's where it gave none)."""
        self.tools = list(tools)
        if not any(t.get("name") == "finish" for t in tools):
            self.tools.append(finish_tool())
        self.own_task = "task" not in prompts
        """Whether ``task`` is LIMBO's prompt (the upstream has none of that name)."""
        self.stop = asyncio.Event()
        """A stop signal came: stop once the record is written."""
        self.failure: BaseException | None = None
        """What made the proxy fail mid-episode (a bug), if anything."""
        self.initialized = False
        """Whether the stdio agent has sent ``initialize`` (over HTTP: its session says)."""
        self._n = 0
        self._stops: dict[int, asyncio.Event] = {}
        """The tool calls being answered (by their message's identity) -> set when cancelled."""

    def cancel(self, request: dict[str, Any]) -> None:
        """The agent cancelled ``request``: a held call is answered (and not sent) at once."""
        stop = self._stops.get(id(request))
        if stop is not None:
            stop.set()

    async def call(self, params: dict[str, Any], stop: asyncio.Event | None = None
                   ) -> dict[str, Any]:
        """One ``tools/call`` (its params as JSON), answered as JSON."""
        self._n += 1
        found = params.get("_meta")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        call_id = next((v for k in CALL_ID_META if isinstance(v := meta.get(k), str)
                        and 0 < len(v) <= 200), f"mcp_{self._n}")
        name, args = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "tools/call needs a name and an arguments object")
        return await self.session.call(name, args, call_id, stop)

    async def relayed(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A prompts or resources request: the upstream's answer, with LIMBO's ``task`` prompt
        on the first page of prompts; a family the upstream does not serve is not found."""
        if method == "prompts/get" and self.own_task and params.get("name") == "task":
            return {"messages": [{"role": "user", "content": {"type": "text",
                                                              "text": self.prompt}}]}
        family = method.split("/")[0]
        if family not in self.session.upstream.capabilities:
            if method == "prompts/list":
                return {"prompts": [TASK_PROMPT] if self.own_task else []}
            if method == "prompts/get":
                raise RpcError(INVALID_PARAMS, f"no prompt {str(params.get('name'))[:80]!r}; "
                                               f"the proxy has one: task")
            raise RpcError(METHOD_NOT_FOUND, f"the upstream MCP server serves no {family}")
        asked = {k: params[k] for k in PARAMS.get(method, ("cursor",)) if k in params}
        result = await self.session.upstream.relay(method, asked)
        if method == "prompts/list" and self.own_task and not params.get("cursor"):
            result = {**result, "prompts": [*(result.get("prompts") or []), TASK_PROMPT]}
        return result

    def capabilities(self) -> dict[str, Any]:
        """What the proxy serves: tools and prompts, and resources when the upstream does
        (its notifications are not relayed: nothing to subscribe to)."""
        return {"tools": {"listChanged": False}, "prompts": {"listChanged": False},
                **({"resources": {"subscribe": False, "listChanged": False}}
                   if "resources" in self.session.upstream.capabilities else {})}

    # -- serving ------------------------------------------------------------------------------

    async def serve(self, port: int | None, after: Callable[[], Awaitable[None]]) -> None:
        """Serve until the episode ends (``port``: HTTP on 127.0.0.1, else stdio), run
        ``after`` (settle, reconcile, record) while still serving, then stop."""
        with self._signals():
            await (self._stdio(after) if port is None else self._http(port, after))

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM: during the episode it ends it; after the end it abandons the writes
        still scheduled. Either way the proxy stops once the record is written (a stdio client
        need not close the pipe)."""
        loop = asyncio.get_running_loop()

        def stop() -> None:
            if not self.session.ended.is_set():
                self.session.end()  # the scheduled writes still land ...
            else:
                self.session.abandon()  # ... unless a signal comes after the end
            self.stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    def failed(self, exc: BaseException) -> None:
        """The proxy failed answering a request (a bug): the episode ends, as ``infra_error``."""
        self.failure = self.failure or exc
        self.session.end()

    async def _stdio(self, after: Callable[[], Awaitable[None]]) -> None:
        from limbo.proxy.wire import LINE_LIMIT

        loop = asyncio.get_running_loop()
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
        channel = Channel(writer, self._message, on_failure=self.failed, on_cancel=self.cancel,
                          limit=LINE_LIMIT, on_answered=self.session.answered)
        self.session.answers_told = True
        channel.read(sys.stdin.fileno())
        self.announce("limbo proxy: serving the episode on stdio")
        serving = asyncio.ensure_future(channel.serve())
        try:
            await _first(serving, self.session.ended.wait())
            self.session.end()  # the client went: nobody waits for a held call
            await channel.drain()
            await after()
            await _first(serving, self.stop.wait())  # the client goes when it is done
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving

    async def _message(self, message: dict[str, Any]) -> Any:
        if "id" not in message:
            return None  # a notification (initialized, ...): nothing to do
        method = message.get("method")
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if not self.initialized and method not in OPEN_METHODS:
            raise RpcError(INVALID_REQUEST, "the session is not initialized: send initialize "
                                            "first")
        if method == "tools/call":
            stop = self._stops[id(message)] = asyncio.Event()
            try:
                return await self.call(params, stop)
            finally:
                del self._stops[id(message)]
        if method == "tools/list":
            return {"tools": self.tools}
        if method in RELAYED:
            return await self.relayed(method, params)
        if method == "initialize":
            self.initialized = True
            asked = params.get("protocolVersion")
            return {"protocolVersion": asked if asked in HANDSHAKE_PROTOCOL_VERSIONS
                    else LATEST_HANDSHAKE_VERSION, "capabilities": self.capabilities(),
                    "serverInfo": self.info,
                    **({"instructions": self.instructions} if self.instructions else {})}
        if method in ("ping", "logging/setLevel"):
            return {}
        raise RpcError(METHOD_NOT_FOUND, f"method {str(method)[:80]!r} is not served by "
                                         f"limbo proxy")

    async def _http(self, port: int, after: Callable[[], Awaitable[None]]) -> None:
        from limbo.proxy.http import AgentEndpoint, serving

        self.initialized = True  # each request's session says (the endpoint refuses the rest)
        endpoint = AgentEndpoint(self._message, on_failure=self.failed, on_cancel=self.cancel)
        async with serving(endpoint, port) as url:
            self.announce(f"limbo proxy: serving the episode at {url}/mcp")
            await self.session.ended.wait()
            await endpoint.drain()
            await after()


async def _first(*waits: Awaitable[Any]) -> None:
    """Wait until the first of ``waits`` is done (the others are cancelled, unless tasks)."""
    futures = [asyncio.ensure_future(w) for w in waits]
    await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    for future, given in zip(futures, waits, strict=True):
        if future is not given:
            future.cancel()
