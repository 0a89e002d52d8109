"""MCP's streamable HTTP, lean: the proxy's face to an agent (``--listen``:
:class:`AgentEndpoint`; its link to an upstream is :mod:`limbo.proxy.httplink`'s). One JSON-RPC
message per POST; a request is answered with one JSON body.

Why not the ``mcp`` SDK's server, as ``limbo mcp`` serves: it runs each request through its
session manager's memory streams and task groups and validates every message into pydantic
models, which cost 2.5–3 ms a call here (``benchmarks/bench_proxy.py --http``), where this
relay adds a fraction of a millisecond. It speaks the handshake era, as the proxy does over
stdio: a client that probes for the stateless era first (``server/discover``) is told there is
no such method, and falls back to ``initialize`` (the SDK's client does; so do the production
harnesses).

What it keeps of the transport's rules: a session id is issued with the ``initialize`` answer
and a request naming another is refused with 404 (the client starts afresh), ``DELETE`` ends
a session; a request that needs a session (anything but ``initialize``, ``ping`` and the
stateless era's probe) and names none is refused with 400 — it never reaches the upstream;
notifications and responses are accepted with 202, and a ``notifications/cancelled`` is told to
``on_cancel`` (the request is then answered as cancelled); ``GET`` is refused with 405 (the proxy pushes nothing); a request
whose ``Host`` or ``Origin`` is not this machine is refused (a web page cannot reach the proxy
through DNS rebinding).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from limbo.base.sockets import listening
from limbo.proxy.httplink import SESSION
from limbo.proxy.wire import (
    ENCODE,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    LINE_LIMIT,
    OPEN_METHODS,
    PARSE_ERROR,
    Handler,
    RpcError,
    cancelled_id,
    loads,
    refusal,
)

LOOPBACK_NAMES = ("localhost", "localhost.localdomain")
CANCELLED = -32800
"""The error answering a request the agent cancelled (HTTP must answer every POST)."""


class AgentEndpoint:
    """Answers each JSON-RPC request posted to it with ``answer(message)``."""

    def __init__(self, answer: Handler,
                 on_failure: Callable[[BaseException], None] | None = None,
                 on_cancel: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.answer, self.on_failure, self.on_cancel = answer, on_failure, on_cancel
        self.sessions: set[str] = set()
        """The open sessions' ids (numbered, not secret: the proxy serves one episode on
        loopback, where any process may connect anyway)."""
        self._issued = 0
        self._answering: dict[tuple[str, bool, Any], dict[str, Any]] = {}
        """The requests being answered, by session and id (their messages)."""
        self._cancelled: set[tuple[str, bool, Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    async def handle(self, request: Any) -> Any:
        """One HTTP request (aiohttp's), answered."""
        from aiohttp import web

        if not _local(request.headers):
            return web.Response(status=403)
        session = request.headers.get(SESSION)
        if session is not None and session not in self.sessions:
            return web.Response(status=404)  # ended, or never issued
        if request.method == "DELETE":
            self.sessions.discard(session or "")
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405, headers={"allow": "POST, DELETE"})
        body = await _body(request.content)
        if body is None:
            return _json(413, _error(None, INVALID_REQUEST, "message too long"))
        try:
            message = loads(body)
        except ValueError as exc:
            return _json(400, _error(None, PARSE_ERROR, str(exc) or "not JSON"))
        refused = refusal(message)
        if refused is not None:
            return _json(400, _error(None, refused.code, refused.message))
        if "method" not in message or "id" not in message:  # a notification, or a response
            self._cancel(session, cancelled_id(message))
            return web.Response(status=202)
        if session is None and message["method"] not in OPEN_METHODS:
            return _json(400, _error(message["id"], INVALID_REQUEST, "no session: send "
                                     "initialize first (its answer names the session)"))
        return await self._request(message, session or "")

    def _cancel(self, session: str | None, ident: Any) -> None:
        key = (session or "", isinstance(ident, str), ident)
        request = self._answering.get(key)
        if request is not None:
            self._cancelled.add(key)
            if self.on_cancel is not None:
                self.on_cancel(request)

    async def _request(self, message: dict[str, Any], session: str) -> Any:
        ident = message["id"]
        key = (session, isinstance(ident, str), ident)
        self._answering[key] = message
        self._idle.clear()
        try:
            response = await self._answered(message)
        finally:
            del self._answering[key]
            if not self._answering:
                self._idle.set()
        if key in self._cancelled:
            self._cancelled.discard(key)
            return _json(200, _error(ident, CANCELLED, "request cancelled"))
        return response

    async def _answered(self, message: dict[str, Any]) -> Any:
        ident = message["id"]
        try:
            result = await self.answer(message)
        except RpcError as exc:
            return _json(200, _error(ident, exc.code, exc.message))
        except Exception as exc:  # noqa: BLE001 - a bug: answered, then told to on_failure
            if self.on_failure is not None:
                self.on_failure(exc)
            return _json(200, _error(ident, INTERNAL_ERROR,
                                     f"limbo proxy failed: {type(exc).__name__}"))
        headers = {}
        if message["method"] == "initialize":
            self._issued += 1
            headers[SESSION] = f"limbo-proxy-{self._issued}"
            self.sessions.add(headers[SESSION])
        return _json(200, {"jsonrpc": "2.0", "id": ident,
                           "result": result if result is not None else {}}, headers)

    async def drain(self) -> None:
        """Wait for the answers still being computed."""
        await self._idle.wait()


@contextlib.asynccontextmanager
async def serving(endpoint: AgentEndpoint, port: int) -> AsyncIterator[str]:
    """``endpoint`` served on 127.0.0.1:``port`` (0: any free port) while inside; its URL."""
    from aiohttp import web

    sock = listening(port, "--listen")
    runner = web.ServerRunner(web.Server(endpoint.handle, access_log=None),
                              handle_signals=False, shutdown_timeout=2.0)
    try:
        await runner.setup()
        await web.SockSite(runner, sock).start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()
        sock.close()


async def _body(stream: Any) -> bytes | None:
    """A request's body; ``None`` past the stdio channel's line limit."""
    body = bytearray()
    while chunk := await stream.read(1 << 16):
        body += chunk
        if len(body) > LINE_LIMIT:
            return None
    return bytes(body)


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    from aiohttp import web

    return web.Response(status=status, body=ENCODE.encode(body).encode("utf-8", "backslashreplace"),
                        content_type="application/json", headers=headers)


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def _local(headers: Mapping[str, str]) -> bool:
    """Whether the request names this machine: its ``Host``, and its ``Origin`` if any."""
    host = urlsplit(f"//{headers.get('host', '')}").hostname
    if host is None or not is_loopback(host):
        return False
    origin = headers.get("origin")
    return origin is None or is_loopback(urlsplit(origin).hostname or "")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (a literal loopback address, or localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
