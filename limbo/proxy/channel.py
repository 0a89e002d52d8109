"""One JSON-RPC connection over newline-delimited stdio (the proxy's to a stdio upstream, and a
stdio agent's to the proxy), lean: each line parsed once by :func:`limbo.proxy.wire.loads`.

The two ends differ in what they forgive. As a *server* (the agent's side) a line that is not
a message is answered — a parse error for what is not JSON, too deep, too long or not UTF-8;
an invalid request for a batch or an id that is neither a string nor an integer — and the
channel reads on. As a *client* (the upstream's side) a line that is not JSON is skipped (a
stdio server that prints its logs to stdout is common), unless it names a request waiting for
its answer, which then fails at once rather than waiting out its timeout; a batch of answers
is read answer by answer. A ``notifications/cancelled`` from the other side is told to
``on_cancel`` (with the request it names, still being answered), whose answer is then not sent
(MCP's rule): the handler decides what stops — the proxy ends a held call at once, and sees a
write already on its way to the upstream through to its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from limbo.proxy.wire import (
    ENCODE,
    INTERNAL_ERROR,
    LINE_LIMIT,
    PARSE_ERROR,
    BadMessage,
    ChannelClosed,
    Handler,
    RpcError,
    cancelled_id,
    expire,
    loads,
    peek_id,
    refusal,
    valid_id,
)


def _key(ident: Any) -> tuple[bool, Any]:
    """A request id as a dict key (``1`` and ``"1"`` are two ids)."""
    return isinstance(ident, str), ident


class Channel:
    """One JSON-RPC connection over a reader and a writer (run :meth:`serve` to read)."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any, on_message: Handler,
                 server: bool = True, on_failure: Callable[[BaseException], None] | None = None,
                 limit: int = LINE_LIMIT,
                 on_cancel: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.reader, self.writer, self.on_message = reader, writer, on_message
        self.limit = limit
        """The reader's limit: a longer line is skipped, and answered (or its request
        failed)."""
        self.server = server
        """The agent's side (answers what is not a message) rather than the upstream's."""
        self.on_failure = on_failure
        """Told of a handler that failed with something other than :class:`RpcError` (a bug:
        the request is answered with an internal error)."""
        self.on_cancel = on_cancel
        """Told of a request the other side cancelled (the request's message)."""
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._answering: dict[tuple[bool, Any], dict[str, Any]] = {}
        """The requests being answered, by id (their messages)."""
        self._cancelled: set[tuple[bool, Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = asyncio.Event()

    def send(self, message: dict[str, Any]) -> None:
        line = ENCODE.encode({"jsonrpc": "2.0", **message}) + "\n"
        self.writer.write(line.encode("utf-8", "backslashreplace"))  # a lone surrogate: \udXXX

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
        timer = None if timeout is None else loop.call_later(timeout, expire, future, timeout)
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
                except asyncio.IncompleteReadError as exc:
                    if exc.partial.strip():
                        self._dispatch(exc.partial)  # a last line without its newline
                    return
                except asyncio.LimitOverrunError as exc:
                    await self._too_long(exc.consumed)
                    continue
                self._dispatch(line)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ChannelClosed("the other side closed the connection"))

    async def _too_long(self, consumed: int) -> None:
        """Skip a line past the reader's limit, and say so to whoever waits for it."""
        head = await self.reader.readexactly(consumed)
        tail = b""
        while not tail.endswith(b"\n"):
            try:
                tail = await self.reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                break
        self._unreadable(BadMessage(f"message longer than {self.limit} bytes", peek_id(head)))

    def _unreadable(self, exc: BadMessage) -> None:
        if self.server:
            self.send({"id": exc.ident, "error": {"code": PARSE_ERROR, "message": str(exc)}})
            return
        future = self._pending.get(exc.ident) if isinstance(exc.ident, int) else None
        if future is not None and not future.done():
            future.set_exception(ChannelClosed(f"its answer was unreadable: {exc}"))

    def _dispatch(self, line: bytes) -> None:
        try:
            message = loads(line)
        except BadMessage as exc:
            self._unreadable(exc)
            return
        except ValueError:
            if line.strip():
                self._unreadable(BadMessage("not JSON", peek_id(line)))
            return
        if not self.server and isinstance(message, list):
            for item in message:  # a batch of answers (JSON-RPC allowed them once)
                if isinstance(item, dict):
                    self._one(item)
            return
        refused = refusal(message) if self.server else None
        if refused is not None:
            self._refuse(message, refused)
        elif isinstance(message, dict):
            self._one(message)

    def _refuse(self, message: Any, exc: RpcError) -> None:
        """Answer every request a refused message holds (one error, id null, if none)."""
        idents = [m["id"] for m in (message if isinstance(message, list) else [message])
                  if isinstance(m, dict) and "method" in m and valid_id(m.get("id"))]
        for ident in idents or [None]:
            self.send({"id": ident, "error": {"code": exc.code, "message": exc.message}})

    def _one(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # a response
            ident = message.get("id")
            future = self._pending.get(ident) if isinstance(ident, int) else None
            if future is not None and not future.done():
                if "error" in message:
                    future.set_exception(RpcError.answered(message["error"]))
                else:
                    future.set_result(message.get("result"))
            return
        cancelled = cancelled_id(message)
        if cancelled is not None:
            self._cancel(_key(cancelled))
            return
        if "id" in message:
            self._answering[_key(message["id"])] = message
        task = asyncio.ensure_future(self._answer(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cancel(self, key: tuple[bool, Any]) -> None:
        request = self._answering.get(key)
        if request is not None:
            self._cancelled.add(key)
            if self.on_cancel is not None:
                self.on_cancel(request)

    async def _answer(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        key = _key(ident)
        try:
            reply = await self._reply(message)
        finally:
            if self._answering.get(key) is message:
                del self._answering[key]
        if "id" in message and key not in self._cancelled:
            self.send({"id": ident, **reply})
        self._cancelled.discard(key)

    async def _reply(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.on_message(message)
        except RpcError as exc:
            return {"error": {"code": exc.code, "message": exc.message}}
        except Exception as exc:  # noqa: BLE001 - a bug: answered, then told to on_failure
            if self.on_failure is not None:
                self.on_failure(exc)
            return {"error": {"code": INTERNAL_ERROR, "message": "limbo proxy failed: "
                                                                 f"{type(exc).__name__}"}}
        return {"result": result if result is not None else {}}

    async def drain(self) -> None:
        """Wait for the answers still being computed."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
