"""A minimal HTTP/1.1 server on asyncio streams, for the model gateway.

Why not a framework: the gateway only needs POST with a JSON body, keep-alive, and two kinds
of answers — a JSON body, or a chunked ``text/event-stream`` — plus the ability to misbehave on
purpose (drop a connection, cut a stream short) for fault tests. That is a page of stdlib code
with no dependency beyond Python, and it binds loopback only.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

log = logging.getLogger("limbo.gateway")
MAX_BODY = 64 * 1024 * 1024
MAX_LINE = 64 * 1024


class BadRequest(Exception):
    """The peer sent something that is not HTTP/1.1 as we speak it."""


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class Responder:
    """Writes one response: :meth:`send` (a whole body) or :meth:`open_stream` + :meth:`chunk`
    + :meth:`end_stream` (chunked); :meth:`close` hangs up without finishing."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.done = False
        self.hung_up = False

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def send(self, status: int, body: bytes, content_type: str = "application/json",
                   headers: dict[str, str] | None = None, declared: int | None = None) -> None:
        """A complete response. ``declared`` overstates Content-Length (a cut-off body)."""
        head = {"Content-Type": content_type, "Content-Length": str(declared or len(body)),
                **(headers or {})}
        self.writer.write(self._head(status, head) + body)
        await self.writer.drain()
        self.done = True

    async def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        await self.send(status, json.dumps(obj).encode(), headers=headers)

    async def open_stream(self, status: int = 200,
                          content_type: str = "text/event-stream") -> None:
        head = {"Content-Type": content_type, "Transfer-Encoding": "chunked",
                "Cache-Control": "no-cache"}
        self.writer.write(self._head(status, head))
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        if data:
            self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await self.writer.drain()

    async def end_stream(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        self.done = True

    async def close(self) -> None:
        """Hang up now (whatever was written is flushed first)."""
        self.hung_up = True
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def _line(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readuntil(b"\r\n")
    if len(line) > MAX_LINE:
        raise BadRequest("line too long")
    return line[:-2]


async def read_request(reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter | None = None) -> Request | None:
    """The next request on a connection, or None when the peer closed it."""
    try:
        first = await _line(reader)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    parts = first.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"bad request line {first[:80]!r}")
    headers: dict[str, str] = {}
    while line := await _line(reader):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    path, _, query = parts[1].partition("?")
    return Request(parts[0].upper(), path, query, headers, await _body(reader, headers))


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = bytearray()
        while size := int((await _line(reader)).split(b";")[0], 16):
            out += await reader.readexactly(size)
            await _line(reader)
            if len(out) > MAX_BODY:
                raise BadRequest("body too large")
        while await _line(reader):  # trailers
            pass
        return bytes(out)
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY:
        raise BadRequest("body too large")
    return await reader.readexactly(length) if length else b""


Handler = Callable[[Request, Responder], Awaitable[None]]


async def _connection(handler: Handler, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, open_: set[asyncio.StreamWriter]) -> None:
    open_.add(writer)
    try:
        while True:
            try:
                req = await read_request(reader, writer)
            except (BadRequest, ValueError, asyncio.LimitOverrunError) as exc:
                await Responder(writer).send_json(400, {"error": {"message": str(exc)}})
                break
            if req is None:
                break
            out = Responder(writer)
            await handler(req, out)
            if out.hung_up or not out.done or req.headers.get("connection", "").lower() == "close":
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        open_.discard(writer)
        if not writer.is_closing():
            writer.close()


async def serve(handler: Handler, host: str, port: int,
                open_: set[asyncio.StreamWriter]) -> asyncio.Server:
    """Start serving ``handler`` on ``host:port`` (port 0: any free port); live connections
    are kept in ``open_`` so that stopping can close them."""
    return await asyncio.start_server(lambda r, w: _connection(handler, r, w, open_), host, port,
                                      limit=MAX_LINE * 2)
