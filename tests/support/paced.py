"""A paced model endpoint on loopback: every request answered after a fixed latency, with an
optional cap on requests in flight (``429`` + ``Retry-After`` beyond it).

It stands in for a provider when what is measured is *our* side of the wire: how many calls a
run keeps in flight, how much CPU each costs, how a run behaves against a rate limit
(``benchmarks/bench_providers.py``, the limiter's and the Ray executor's tests). Test
scaffolding: it lives here, outside the package. It speaks the three APIs the adapters
use — OpenAI Responses, Chat Completions and Anthropic Messages, not streamed — and plays a
fixed two-turn agent: the first turn calls ``wait`` (one second), the second ``finish``, so
every episode makes exactly two model calls.

Raw asyncio HTTP/1.1 with keep-alive: a server this simple costs far less CPU per request than
the clients it is measuring.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from limbo.episode.models import ModelTurn, ToolCall
from limbo.log.records import Usage
from limbo.providers import chat_api, messages_api, responses_api

FINISH = {"status": "completed", "summary": "paced loopback run"}
USAGE = Usage(input_tokens=1000, output_tokens=20)


@dataclass
class Pace:
    """How the endpoint behaves: ``latency_s`` per answer; past ``max_in_flight`` requests
    being answered, a new one gets ``429`` with ``Retry-After: retry_after_s``."""

    latency_s: float = 0.5
    max_in_flight: int | None = None
    retry_after_s: float = 1


@dataclass
class Counts:
    """What the endpoint saw."""

    answered: int = 0
    refused: int = 0
    peak_in_flight: int = 0
    in_flight: int = 0
    connections: int = 0
    """Connections opened so far."""
    open_connections: int = 0
    by_path: dict[str, int] = field(default_factory=dict)


def _api(path: str) -> str | None:
    for suffix, api in (("/chat/completions", "chat"), ("/responses", "responses"),
                        ("/messages", "messages")):
        if path.split("?")[0].endswith(suffix):
            return api
    return None


def _answered_once(api: str, body: dict[str, Any]) -> bool:
    """Whether the conversation already holds a tool result (then this is the second turn)."""
    if api == "chat":
        return any(m.get("role") == "tool" for m in body.get("messages") or [])
    if api == "responses":
        return any(i.get("type") == "function_call_output" for i in body.get("input") or [])
    return any(isinstance(m.get("content"), list) and
               any(b.get("type") == "tool_result" for b in m["content"])
               for m in body.get("messages") or [])


def answer(api: str, body: dict[str, Any], n: int) -> dict[str, Any]:
    """The reply to request number ``n``: ``wait`` first, then ``finish``."""
    call = (ToolCall(id=f"call_{n}", name="finish", arguments=FINISH)
            if _answered_once(api, body)
            else ToolCall(id=f"call_{n}", name="wait", arguments={"seconds": 1}))
    turn = ModelTurn(tool_calls=[call], usage=USAGE)
    model = str(body.get("model") or "paced")
    if api == "chat":
        return chat_api.response_body(turn, model, f"chatcmpl-{n}")
    if api == "responses":
        return responses_api.response_body(turn, model, responses_api.Ids(f"resp_{n}", str(n)),
                                           responses_api.Namespaces())
    return messages_api.response_body(turn, model, f"msg_{n}")


class PacedServer:
    """The endpoint; ``await start()`` inside your loop (or use :func:`serve_in_thread`)."""

    def __init__(self, pace: Pace) -> None:
        self.pace, self.counts = pace, Counts()
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Future[Any]] = set()
        self._stopping = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0,
                                                  backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening, then end every open connection's handler here, before the loop
        goes: a handler left to ``asyncio.run``'s cancellation ends cancelled, which Python
        3.11's stream callback reports as a ``CancelledError`` traceback, and one left to a
        closed loop says "Event loop is closed" when it is collected."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await asyncio.sleep(0)  # the closed connections' transports finish closing
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self.counts.connections += 1
        self.counts.open_connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path, length = _head(head)
                payload = await reader.readexactly(length)
                status, headers, data = await self._reply(path, payload)
                writer.write(_response(status, headers, data))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            # stop() ended this connection: it ends here, not cancelled (see stop)
        finally:
            if task is not None:
                self._handlers.discard(task)
            self.counts.open_connections -= 1
            writer.close()

    async def _reply(self, path: str, payload: bytes) -> tuple[int, dict[str, str], bytes]:
        if path == "/stats":
            return 200, {}, json.dumps(self.counts.__dict__).encode()
        api = _api(path)
        if api is None:
            return 404, {}, b'{"error": {"message": "no such route"}}'
        c, cap = self.counts, self.pace.max_in_flight
        if cap is not None and c.in_flight >= cap:
            c.refused += 1
            return 429, {"retry-after": f"{self.pace.retry_after_s:g}"}, json.dumps(
                {"type": "error", "error": {"type": "rate_limit_error", "code": "rate_limit_exceeded",
                                            "message": "too many requests in flight"}}).encode()
        c.in_flight += 1
        c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            await asyncio.sleep(self.pace.latency_s)  # wall-clock-ok: a provider's latency
        finally:
            c.in_flight -= 1
        c.answered += 1
        c.by_path[api] = c.by_path.get(api, 0) + 1
        return 200, {}, json.dumps(answer(api, json.loads(payload or b"{}"), c.answered)).encode()


def _head(head: bytes) -> tuple[str, int]:
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return path, length


REASONS = {200: "OK", 404: "Not Found", 429: "Too Many Requests"}


def _response(status: int, headers: dict[str, str], data: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}",
             "content-type: application/json", f"content-length: {len(data)}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


@contextlib.contextmanager
def serve_in_thread(pace: Pace) -> Iterator[PacedServer]:
    """A :class:`PacedServer` on its own event loop in a background thread."""
    server = PacedServer(pace)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=main, name="limbo-paced", daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
