"""JSON-RPC 2.0 over newline-delimited stdio: the proxy's lean path to a stdio upstream and from
a stdio agent.

Why not the ``mcp`` SDK's session here: the SDK validates every message into pydantic models,
routes it through memory streams and task groups, and (its stdio server) reads and writes in
worker threads. That is right for an application, and costs 2 to 5 ms per hop on a busy machine
(measured: a proxy that only forwarded through the SDK's server and client added that much to
each call). The proxy is a relay: it parses each line once with ``json``, answers or forwards
it, and writes one line: under 0.2 ms added to a forwarded read (``benchmarks/
bench_proxy.py``; a request waits on its own future and timer, not ``asyncio.wait_for``'s extra
task hop). The messages are still MCP's: what the proxy says is checked by the SDK's
own client in the tests. HTTP, both ways, is :mod:`limbo.proxy.http`'s, on the same messages.

A :class:`Channel` sends requests and notifications and matches responses to requests by id;
requests and notifications from the other side go to ``on_message``, which answers a request
by returning its result (or raising :class:`RpcError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602
PARSE_ERROR = -32700
LINE_LIMIT = 64 * 1024 * 1024
"""Longest message read (a read listing thousands of records is far shorter)."""
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def loads(text: str | bytes) -> Any:
    """JSON as the proxy reads it from either side: ``NaN`` and the infinities, which JSON does
    not have (Python's ``json.dumps`` writes them), read as the strings that name them — so an
    answer carrying one still reaches the agent, and the journal, which writes strict JSON."""
    return json.loads(text, parse_constant=str)


def _expire(future: asyncio.Future[Any], timeout: float) -> None:
    if not future.done():
        future.set_exception(TimeoutError(f"no answer in {timeout:g} s"))


class RpcError(Exception):
    """A JSON-RPC error: raised by a handler to answer with it, or by :meth:`Channel.request`
    when the other side answered with it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    @classmethod
    def answered(cls, error: Any) -> RpcError:
        """The error an answer carries, whatever its shape: a code that is no integer is an
        internal error."""
        body = error if isinstance(error, dict) else {}
        code = body.get("code")
        return cls(code if isinstance(code, int) and not isinstance(code, bool)
                   else INTERNAL_ERROR, str(body.get("message", ""))[:2000])


class ChannelClosed(Exception):
    """The other side went away before answering."""


class Channel:
    """One JSON-RPC connection over a reader and a writer (run :meth:`serve` to read)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, on_message: Handler,
                 answer_garbage: bool = True) -> None:
        self.reader, self.writer, self.on_message = reader, writer, on_message
        self.answer_garbage = answer_garbage
        """Answer a line that is not JSON with a parse error (a server does); a client ignores
        it (a stdio server that also prints its logs to stdout is common)."""
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = asyncio.Event()

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write((_ENCODE.encode({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      timeout: float | None = None) -> Any:
        """The result of one request; :class:`RpcError` for an error answer,
        :class:`ChannelClosed` when the other side is gone, ``TimeoutError`` past ``timeout``."""
        if self.closed.is_set():
            raise ChannelClosed("the connection is closed")
        self._next += 1
        ident = self._next
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending[ident] = future
        self.send({"id": ident, "method": method, **({"params": params} if params else {})})
        timer = None if timeout is None else loop.call_later(timeout, _expire, future, timeout)
        try:
            return await future
        finally:
            self._pending.pop(ident, None)
            if timer is not None:
                timer.cancel()

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"method": method, **({"params": params} if params else {})})

    async def serve(self) -> None:
        """Read until the other side closes; then fail every request still waiting."""
        try:
            while True:
                try:
                    line = await self.reader.readuntil(b"\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    self.send({"id": None, "error": {"code": PARSE_ERROR,
                                                     "message": "message too long"}})
                    return
                self._dispatch(line)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ChannelClosed("the other side closed the connection"))

    def _dispatch(self, line: bytes) -> None:
        try:
            message = loads(line)
        except ValueError:
            if line.strip() and self.answer_garbage:
                self.send({"id": None, "error": {"code": PARSE_ERROR, "message": "not JSON"}})
            return
        if not isinstance(message, dict):
            return
        if "method" not in message:  # a response
            ident = message.get("id")
            future = self._pending.get(ident) if isinstance(ident, int) else None
            if future is not None and not future.done():
                if "error" in message:
                    future.set_exception(RpcError.answered(message["error"]))
                else:
                    future.set_result(message.get("result"))
            return
        task = asyncio.ensure_future(self._answer(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        try:
            result = await self.on_message(message)
        except RpcError as exc:
            if ident is not None:
                self.send({"id": ident, "error": {"code": exc.code, "message": exc.message}})
            return
        if ident is not None:
            self.send({"id": ident, "result": result if result is not None else {}})

    async def drain(self) -> None:
        """Wait for the answers still being computed."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
