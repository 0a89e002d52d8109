"""One JSON-RPC connection over newline-delimited stdio (the proxy's to a stdio upstream, and a
stdio agent's to the proxy), lean: each line parsed once by :func:`limbo.proxy.wire.loads`, as
it arrives.

Why the channel reads its pipe itself (:meth:`Channel.read`), not through an asyncio pipe
transport and ``StreamReader``: a line is read, parsed and handed on in the callback that
found the pipe readable — an answer wakes the call waiting for it at once, a request starts its
handler — with no reading task woken in between (a turn of the event loop per message, twice
per proxied call), and each read lands in one buffer made once. asyncio's pipe transport
allocates 256 KiB for every read, which the C library maps and unmaps each time (three system
calls and a fresh page per message, measured with strace).

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
import os
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
    Relayed,
    RpcError,
    cancelled_id,
    expire,
    loads,
    peek_id,
    refusal,
    relayed,
    valid_id,
)


def _key(ident: Any) -> tuple[bool, Any]:
    """A request id as a dict key (``1`` and ``"1"`` are two ids)."""
    return isinstance(ident, str), ident


HEAD = 512
"""How much of a line past the limit is kept, to tell whose it was (:func:`peek_id`)."""
CHUNK = 256 * 1024
"""The most one read takes from the pipe."""


class Channel:
    """One JSON-RPC connection: the pipe it reads (:meth:`read`) and the ``writer`` it writes
    to (an asyncio write transport)."""

    def __init__(self, writer: Any, on_message: Handler, server: bool = True,
                 on_failure: Callable[[BaseException], None] | None = None,
                 limit: int = LINE_LIMIT,
                 on_cancel: Callable[[dict[str, Any]], None] | None = None,
                 on_answered: Callable[[], None] | None = None) -> None:
        self.writer, self.on_message = writer, on_message
        self.loop = asyncio.get_running_loop()
        self.limit = limit
        """The longest line read: a longer one is skipped, and answered (or its request
        failed)."""
        self.server = server
        """The agent's side (answers what is not a message) rather than the upstream's."""
        self.on_failure = on_failure
        """Told of a handler that failed with something other than :class:`RpcError` (a bug:
        the request is answered with an internal error)."""
        self.on_cancel = on_cancel
        """Told of a request the other side cancelled (the request's message)."""
        self.on_answered = on_answered
        """Called once each request is answered (its answer written, or not sent because it
        was cancelled): what waits for the answer to be on its way runs then."""
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._answering: dict[tuple[bool, Any], dict[str, Any]] = {}
        """The requests being answered, by id (their messages)."""
        self._cancelled: set[tuple[bool, Any]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._partial: list[bytes] = []
        """The start of a line whose newline has not come yet."""
        self._partial_size = 0
        self._skipping: bytes | None = None
        """The head of a line past the limit, skipped until its newline."""
        self._fd = -1
        """The pipe read (-1: none, or no longer)."""
        self._chunk = bytearray()
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
        loop = self.loop
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
        """Wait until the other side closes (its lines are read as they come); then every
        request still waiting fails. Cancelled, the channel reads no more."""
        try:
            await self.closed.wait()
        finally:
            self._stop_reading()
            self._close_reading()

    # -- reading ------------------------------------------------------------------------------

    def read(self, fd: int) -> None:
        """Read the pipe ``fd`` (non-blocking from now on), each line as it comes."""
        os.set_blocking(fd, False)
        self._fd, self._chunk = fd, bytearray(CHUNK)
        self.loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            n = os.readv(self._fd, [self._chunk])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0  # the pipe broke: the other side is gone
        if n:
            self.data_received(bytes(memoryview(self._chunk)[:n]))
        else:
            self._stop_reading()
            self.connection_lost(None)

    def _stop_reading(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self._fd)
            self._fd = -1

    def data_received(self, data: bytes) -> None:
        """Each line ``data`` ends, handed on now; the rest kept for the next chunk."""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._line_ends(data[start:end + 1])
            start = end + 1
        if start < len(data):
            self._line_goes_on(data[start:] if start else data)

    def connection_lost(self, exc: Exception | None) -> None:
        """The other side closed: a last line without its newline is read all the same."""
        if self._skipping is not None:
            self._too_long(self._skipping)
        elif self._partial:
            last = b"".join(self._partial)
            self._partial, self._partial_size = [], 0
            if last.strip():
                self._dispatch(last)
        self._close_reading()

    def _close_reading(self) -> None:
        self.closed.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosed("the other side closed the connection"))

    def _line_ends(self, piece: bytes) -> None:
        if self._skipping is not None:
            head, self._skipping = self._skipping, None
            self._too_long(head)
            return
        if self._partial:
            piece = b"".join([*self._partial, piece])
            self._partial, self._partial_size = [], 0
        if len(piece) - 1 > self.limit:
            self._too_long(piece[:HEAD])
        else:
            self._dispatch(piece)

    def _line_goes_on(self, piece: bytes) -> None:
        if self._skipping is not None:
            return
        self._partial.append(piece)
        self._partial_size += len(piece)
        if self._partial_size > self.limit:  # skip the rest of it; keep whose it was
            self._skipping = b"".join(self._partial)[:HEAD]
            self._partial, self._partial_size = [], 0

    def _too_long(self, head: bytes) -> None:
        """A line past the limit was skipped: say so to whoever waits for it."""
        self._unreadable(BadMessage(f"message longer than {self.limit} bytes", peek_id(head)))

    def _unreadable(self, exc: BadMessage) -> None:
        if self.server:
            self.send({"id": exc.ident, "error": {"code": PARSE_ERROR, "message": str(exc)}})
            return
        future = self._pending.get(exc.ident) if isinstance(exc.ident, int) else None
        if future is not None and not future.done():
            future.set_exception(ChannelClosed(f"its answer was unreadable: {exc}"))

    def _dispatch(self, line: bytes) -> None:
        answer = None if self.server else relayed(line)
        if answer is not None:  # the usual answer: read in one pass, its bytes kept
            future = self._pending.get(answer[0])
            if future is not None and not future.done():
                future.set_result(answer[1])
            return
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
            if not valid_id(message["id"]):
                return  # the upstream asked under an id no answer could name
            self._answering[_key(message["id"])] = message
        self._tasks.add(self.loop.create_task(self._answer(message)))

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
            self._tasks.discard(asyncio.current_task(self.loop))  # done: nothing to call back
        if "id" in message and key not in self._cancelled:
            self._send_reply(ident, reply)
        self._cancelled.discard(key)
        if self.on_answered is not None:
            self.on_answered()

    def _send_reply(self, ident: Any, reply: dict[str, Any]) -> None:
        """The answer to request ``ident``: a result the upstream sent and nothing changed goes
        as the bytes it came in (:func:`limbo.proxy.wire.relayed`)."""
        result = reply.get("result")
        if type(result) is not Relayed:
            self.send({"id": ident, **reply})
            return
        head = '{"jsonrpc":"2.0","id":' + ENCODE.encode(ident) + ',"result":'
        self.writer.write(head.encode("utf-8", "backslashreplace") + result.raw + b"}\n")

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
