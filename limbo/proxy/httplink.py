"""The proxy's link to an upstream over MCP's streamable HTTP (``--upstream-url``), lean.

Each JSON-RPC message is one POST, with the session id and protocol version the ``initialize``
answer set. A request's answer is the JSON body, or the event stream the server opens for it
(the ``mcp`` SDK's default), read in chunks of any size up to :data:`ANSWER_LIMIT` — an event's
data may span any number of lines and bytes. A request the server sends on such a stream (a
``ping``) goes to ``on_message`` and is answered with a POST of its own.

An upstream that restarts forgets its sessions: a request naming one is answered ``404`` and
was not acted on (the transport's rule). The link then opens a new session — ``initialize``
again, as first sent — and sends the request in it, once. A request in flight when the
upstream died got no answer: it is :class:`ChannelClosed`, and whether it took effect is
reconciliation's to find out.

Why aiohttp and not httpx (the ``mcp`` SDK's): its C parser costs a third of the CPU per
request (measured on loopback: 0.29–0.33 ms against 0.86–0.93 ms), and every millisecond of
the proxy's is added to each call the agent makes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from limbo.proxy.wire import ENCODE, ChannelClosed, Handler, RpcError, loads

SESSION = "mcp-session-id"
VERSION = "mcp-protocol-version"
ANSWER_LIMIT = 256 * 1024 * 1024
"""Longest answer read from an upstream (a longer one is an answer lost)."""
_CHUNK = 1 << 16


class _SessionGone(Exception):
    """The upstream answered 404 to a request naming a session: it holds no such session."""


class HttpLink:
    """A JSON-RPC connection to a streamable-HTTP MCP server. An HTTP failure, or an answer
    that is no JSON-RPC response, is :class:`ChannelClosed`: whether the server acted on the
    request is unknown."""

    def __init__(self, url: str, headers: dict[str, str], on_message: Handler) -> None:
        import aiohttp

        self.url, self.on_message = url, on_message
        self.http = aiohttp.ClientSession(
            headers={**headers, "accept": "application/json, text/event-stream",
                     "content-type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30.0))  # each request's own
        self._failed: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError)
        self.session: dict[str, str] = {}
        """The headers the ``initialize`` answer set (session id, protocol version)."""
        self._opening: dict[str, Any] | None = None
        """The ``initialize`` params, to open a new session with after a restart."""
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      timeout: float | None = None) -> Any:
        if method == "initialize":
            self._opening = params
        message = self._message(method, params)
        try:
            async with asyncio.timeout(timeout):
                try:
                    return await self._post(message)
                except _SessionGone:
                    await self._reopen()
                    return await self._post(message)
        except self._failed as exc:
            raise ChannelClosed(f"{type(exc).__name__}: {exc}") from None
        except _SessionGone:
            raise ChannelClosed("the upstream forgot the session it had just opened") from None

    def _message(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self._next += 1
        return {"jsonrpc": "2.0", "id": self._next, "method": method,
                **({"params": params} if params else {})}

    async def _reopen(self) -> None:
        """A new session, opened as the first one was."""
        if self._opening is None:
            raise ChannelClosed("the upstream holds no session and none was opened")
        self.session.clear()
        await self._post(self._message("initialize", self._opening))
        await self.notify("notifications/initialized")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        with contextlib.suppress(*self._failed, _SessionGone):
            await self._post({"jsonrpc": "2.0", "method": method,
                              **({"params": params} if params else {})})

    async def _post(self, message: dict[str, Any]) -> Any:
        async with self.http.post(self.url, data=ENCODE.encode(message).encode(),
                                  headers=self.session) as response:
            if response.status == 404 and SESSION in self.session:
                raise _SessionGone()
            if message.get("method") == "initialize" and response.headers.get(SESSION):
                self.session[SESSION] = response.headers[SESSION]
            if "id" not in message:
                return None  # a notification or a response: nothing comes back
            if response.content_type == "text/event-stream":
                async for event in events(response.content):
                    if "method" in event:
                        self._later(self._serve(event))
                    elif event.get("id") == message["id"]:
                        return self._outcome(message, event)
                raise ChannelClosed(f"HTTP {response.status}: the event stream ended without "
                                    f"an answer")
            body = await _read(response.content)
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
            with contextlib.suppress(*self._failed, _SessionGone):
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


async def _read(stream: Any, limit: int = ANSWER_LIMIT) -> bytes:
    """A whole body, up to ``limit`` bytes (:class:`ChannelClosed` past it)."""
    body = bytearray()
    while chunk := await stream.read(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise ChannelClosed(f"an answer longer than {limit} bytes")
    return bytes(body)


async def events(stream: Any, limit: int = ANSWER_LIMIT) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an event stream: each event's ``data`` lines, joined, however
    long (up to ``limit`` bytes an event; :class:`ChannelClosed` past it)."""
    buffer, data, size = bytearray(), [], 0
    while chunk := await stream.read(_CHUNK):
        start = len(buffer)
        buffer += chunk
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[:end]).rstrip(b"\r")
            del buffer[:end + 1]
            start = 0
            if line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
                size += len(line)
            elif not line and data:
                message = _event(data)
                data, size = [], 0
                if message is not None:
                    yield message
        if size + len(buffer) > limit:
            raise ChannelClosed(f"an event longer than {limit} bytes")


def _event(data: list[bytes]) -> dict[str, Any] | None:
    try:
        message = loads(b"\n".join(data))
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
