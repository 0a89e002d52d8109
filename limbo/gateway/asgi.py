"""Serving ASGI apps on loopback with uvicorn, and the few raw ASGI moves the gateway needs.

The gateway and the MCP server share one uvicorn server per host (a runner's episode, a test,
``limbo mcp``), inside the event loop of whoever owns it, so that every request touching an
episode's world runs on that loop's thread. Startup and shutdown are awaited directly (no
polling main loop, no signal handlers taken over from the caller), through uvicorn's public
``Config`` and ``Server``.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.sockets import listening

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_BODY = 64 * 1024 * 1024
log = logging.getLogger("limbo.gateway")


class BodyTooLarge(Exception):
    """A request body over :data:`MAX_BODY`."""


@dataclass
class HttpRequest:
    """One HTTP request, read whole (the gateway's requests are JSON bodies)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


async def read_request(scope: Scope, receive: Receive) -> HttpRequest:
    """The request of ``scope`` with its body; :class:`BodyTooLarge` past :data:`MAX_BODY`."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            raise BodyTooLarge
        if not message.get("more_body"):
            break
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    return HttpRequest(scope["method"].upper(), scope["path"],
                   scope.get("query_string", b"").decode("latin-1"), headers, bytes(body))


class Responder:
    """Writes one response on ``send``: :meth:`send` (a whole body), or :meth:`open_stream`,
    :meth:`chunk`, :meth:`end_stream`."""

    def __init__(self, scope: Scope, send: Send) -> None:
        self.scope, self._send = scope, send
        self.started = False

    async def send(self, status: int, body: bytes, content_type: str = "application/json",
                   headers: dict[str, str] | None = None) -> None:
        """A complete response."""
        head = {"content-type": content_type, "content-length": str(len(body)),
                **{k.lower(): v for k, v in (headers or {}).items()}}
        await self._start(status, head)
        await self._send({"type": "http.response.body", "body": body, "more_body": False})

    async def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        await self.send(status, json.dumps(obj).encode(), headers=headers)

    async def open_stream(self, status: int = 200, content_type: str = "text/event-stream") -> None:
        await self._start(status, {"content-type": content_type, "cache-control": "no-cache"})

    async def chunk(self, data: bytes) -> None:
        if data:
            await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _start(self, status: int, headers: dict[str, str]) -> None:
        self.started = True
        await self._send({"type": "http.response.start", "status": status,
                          "headers": [(k.encode(), v.encode()) for k, v in headers.items()]})


class LoopbackServer:
    """``app`` served by uvicorn on ``host`` (loopback only) in the running event loop."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in LOOPBACK:
            raise UsageError(f"limbo serves loopback only (got host {host!r})")
        self.app, self.host, self.port = app, host, port
        self._server: Any = None
        self._socket: socket.socket | None = None

    async def start(self) -> None:
        try:
            import uvicorn
        except ImportError:
            raise UsageError("serving the gateway or the MCP server needs uvicorn: "
                             "pip install 'limbo-bench[mcp]'") from None

        sock = listening(self.port, host=self.host)
        config = uvicorn.Config(self.app, http="h11", lifespan="off",
                                log_level="warning", access_log=False, date_header=False,
                                server_header=False, timeout_graceful_shutdown=2)
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)  # what Server.serve sets before startup
        await server.startup(sockets=[sock])
        self._server, self._socket = server, sock
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.shutdown(sockets=[self._socket])
            self._socket = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"
