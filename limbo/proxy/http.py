"""MCP's streamable HTTP, lean, both ways: the proxy's face to an agent (``--listen``:
:class:`AgentEndpoint`) and its link to an upstream (``--upstream-url``: :class:`HttpLink`).
One JSON-RPC message per POST; a request is answered with one JSON body (or, from an upstream,
possibly an event stream).

Why not the ``mcp`` SDK's server, as ``limbo mcp`` serves: it runs each request through its
session manager's memory streams and task groups and validates every message into pydantic
models, which cost 2.5–3 ms a call here (``benchmarks/bench_proxy.py --http``), where this
relay adds a fraction of a millisecond. It speaks the handshake era, as the proxy does over
stdio: a client that probes for the stateless era first (``server/discover``) is told there is
no such method, and falls back to ``initialize`` (the SDK's client does; so do the production
harnesses).

What it keeps of the transport's rules: a session id is issued with the ``initialize`` answer
and a request naming another is refused with 404 (the client starts afresh), ``DELETE`` ends
a session; notifications and responses are accepted with 202; ``GET`` is refused with 405 (the
proxy pushes nothing); a request whose ``Host`` or ``Origin`` is not this machine is refused
(a web page cannot reach the proxy through DNS rebinding).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
from collections.abc import AsyncIterable, AsyncIterator, Coroutine, Mapping
from typing import Any
from urllib.parse import urlsplit

from limbo.base.sockets import listening
from limbo.proxy.wire import LINE_LIMIT, PARSE_ERROR, ChannelClosed, Handler, RpcError, loads

SESSION = "mcp-session-id"
VERSION = "mcp-protocol-version"
INVALID_REQUEST = -32600
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


class AgentEndpoint:
    """Answers each JSON-RPC request posted to it with ``answer(message)``."""

    def __init__(self, answer: Handler) -> None:
        self.answer = answer
        self.sessions: set[str] = set()
        """The open sessions' ids (numbered, not secret: the proxy serves one episode on
        loopback, where any process may connect anyway)."""
        self._issued = 0

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
        except ValueError:
            return _json(400, _error(None, PARSE_ERROR, "not JSON"))
        if not isinstance(message, dict):
            return _json(400, _error(None, INVALID_REQUEST, "one JSON-RPC message per request"))
        if "method" not in message or "id" not in message:  # a notification, or a response
            return web.Response(status=202)  # nothing the proxy acts on
        return await self._request(message)

    async def _request(self, message: dict[str, Any]) -> Any:
        ident = message["id"]
        try:
            result = await self.answer(message)
        except RpcError as exc:
            return _json(200, _error(ident, exc.code, exc.message))
        headers = {}
        if message["method"] == "initialize":
            self._issued += 1
            headers[SESSION] = f"limbo-proxy-{self._issued}"
            self.sessions.add(headers[SESSION])
        return _json(200, {"jsonrpc": "2.0", "id": ident,
                           "result": result if result is not None else {}}, headers)


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

    return web.Response(status=status, body=_ENCODE.encode(body).encode(),
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


class HttpLink:
    """A JSON-RPC connection to a streamable-HTTP MCP server: each message one POST (with the
    session id and protocol version the ``initialize`` answer set), a request's answer the JSON
    body or the event stream the server opens for it. A request the server sends on such a
    stream (a ``ping``) goes to ``on_message`` and is answered with a POST of its own. An HTTP
    failure, or an answer that is no JSON-RPC response, is :class:`ChannelClosed`: whether the
    server acted on the request is unknown.

    Why aiohttp and not httpx (the ``mcp`` SDK's): its C parser costs a third of the CPU per
    request (measured on loopback: 0.29–0.33 ms against 0.86–0.93 ms), and every millisecond
    of the proxy's is added to each call the agent makes."""

    def __init__(self, url: str, headers: dict[str, str], on_message: Handler,
                 read_timeout: float) -> None:
        import aiohttp

        self.url, self.on_message = url, on_message
        self.http = aiohttp.ClientSession(
            headers={**headers, "accept": "application/json, text/event-stream",
                     "content-type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=read_timeout))
        self._failed: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError)
        self.session: dict[str, str] = {}
        """The headers the ``initialize`` answer set (session id, protocol version)."""
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      timeout: float | None = None) -> Any:
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next, "method": method,
                   **({"params": params} if params else {})}
        try:
            async with asyncio.timeout(timeout):
                return await self._post(message)
        except self._failed as exc:
            raise ChannelClosed(f"{type(exc).__name__}: {exc}") from None

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(*self._failed):
            await self._post({"jsonrpc": "2.0", "method": method,
                              **({"params": params} if params else {})})

    async def _post(self, message: dict[str, Any]) -> Any:
        async with self.http.post(self.url, data=_ENCODE.encode(message).encode(),
                                  headers=self.session) as response:
            if message.get("method") == "initialize" and response.headers.get(SESSION):
                self.session[SESSION] = response.headers[SESSION]
            if "id" not in message:
                return None  # a notification or a response: nothing comes back
            if response.content_type == "text/event-stream":
                async for event in _events(response.content):
                    if "method" in event:
                        self._later(self._serve(event))
                    elif event.get("id") == message["id"]:
                        return self._outcome(message, event)
                raise ChannelClosed(f"HTTP {response.status}: the event stream ended without "
                                    f"an answer")
            body = await response.read()
        try:
            answer = loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not ("result" in answer or "error" in answer):
            raise ChannelClosed(f"HTTP {response.status} with no JSON-RPC answer")
        return self._outcome(message, answer)

    def _outcome(self, message: dict[str, Any], answer: dict[str, Any]) -> Any:
        if "error" in answer:
            raise RpcError.answered(answer["error"])
        result = answer.get("result")
        if message["method"] == "initialize" and isinstance(result, dict) and \
                isinstance(result.get("protocolVersion"), str):
            self.session[VERSION] = result["protocolVersion"]
        return result

    async def _serve(self, event: dict[str, Any]) -> None:
        """Answer a request the server sent on an event stream (a notification: nothing)."""
        try:
            reply: dict[str, Any] = {"result": await self.on_message(event) or {}}
        except RpcError as exc:
            reply = {"error": {"code": exc.code, "message": exc.message}}
        if "id" in event:
            with contextlib.suppress(*self._failed):
                await self._post({"jsonrpc": "2.0", "id": event["id"], **reply})

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        """End the session (the server may keep none) and the connection."""
        if SESSION in self.session:
            with contextlib.suppress(*self._failed, TimeoutError):
                async with asyncio.timeout(2.0):
                    await (await self.http.delete(self.url, headers=self.session)).release()
        for task in list(self._tasks):
            task.cancel()
        await self.http.close()


async def _events(stream: AsyncIterable[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an event stream (each event's ``data`` lines, joined)."""
    data: list[str] = []
    async for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            try:
                message = loads("\n".join(data))
            except ValueError:
                message = None
            data = []
            if isinstance(message, dict):
                yield message
