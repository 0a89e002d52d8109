"""Provider failures staged on chosen requests of the model gateway, for testing how the SDK
adapters cope with a misbehaving model API: an error status, a connection dropped without an
answer, a body or stream cut short, an error reported inside a stream.

Test scaffolding, so it lives here and not in the gateway. :class:`StagedGateway` is the real
gateway with an ASGI layer in front of its app: each model request of an episode is numbered
from 1 (retries included, in :attr:`StagedGateway.requests`), and ``stage(episode, {n: ...})``
says what request ``n`` gets instead of the gateway's clean answer.

Hanging up is the one thing ASGI cannot say (an app that returns without answering gets a
``500`` from uvicorn). So a staged gateway is reached through :class:`Front`, a plain asyncio
TCP relay on 127.0.0.1 that its ``url`` names: to hang up on a request, the layer asks the relay
to end the server's side of that connection (found by the request's ASGI ``client`` address);
uvicorn sees its client go, flushes what it wrote, and the relay passes that on and closes the
client's connection — what was written stays written, the rest never comes.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from limbo.gateway import Gateway, ThreadedGateway
from limbo.gateway.asgi import Message, Receive, Responder, Scope, Send
from limbo.gateway.server import EPISODE, ROUTES, error_body, sse


@dataclass(frozen=True)
class HttpError:
    """Answer with an error status (429, 500, 529, ...) in the API's own error format."""

    status: int
    retry_after_s: float | None = None
    message: str = "injected by the limbo gateway"


@dataclass(frozen=True)
class Drop:
    """Read the request, then hang up without answering."""


@dataclass(frozen=True)
class Truncate:
    """Send only the first ``events`` stream events (or, unstreamed, half the body), then hang
    up. With ``clean``, end the chunked body properly instead, so the stream is well-formed but
    lacks its terminal events."""

    events: int = 2
    clean: bool = False


@dataclass(frozen=True)
class StreamError:
    """Start a stream, then report a provider failure inside it (``response.failed``, an
    ``error`` event, or an error chunk), with the API's error ``code``."""

    code: str = "server_error"


Injection = HttpError | Drop | Truncate | StreamError


@dataclass
class _Pair:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    gone: asyncio.Event = field(default_factory=asyncio.Event)


class Front:
    """A TCP relay on 127.0.0.1 in front of ``port``, able to hang up on one connection."""

    def __init__(self) -> None:
        self.port = 0
        self._target = 0
        self._server: asyncio.AbstractServer | None = None
        self._pairs: dict[int, _Pair] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, target: int) -> None:
        self._target = target
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for pair in list(self._pairs.values()):
            pair.client.close()
            pair.server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def hang_up(self, client: tuple[str, int]) -> None:
        """End the connection the gateway sees as coming from ``client`` (its ASGI scope's
        ``client``): the gateway's side first, then, once all it wrote has been passed on,
        the client's."""
        pair = self._pairs.get(client[1])
        if pair is None:
            raise RuntimeError(f"no relayed connection from {client}")
        with contextlib.suppress(OSError):
            pair.server.write_eof()
        await pair.gone.wait()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        local = up_writer.get_extra_info("sockname")[1]
        pair = self._pairs[local] = _Pair(writer, up_writer)
        try:
            up = asyncio.create_task(_pump(reader, up_writer))
            await _pump(up_reader, writer)  # until the gateway's side ends
            up.cancel()
            await asyncio.gather(up, return_exceptions=True)
        finally:
            writer.close()
            up_writer.close()
            self._pairs.pop(local, None)
            pair.gone.set()
            self._tasks.discard(task)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then pass the end on (a half-close)."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


class StagedGateway(Gateway):
    """The model gateway, reached through a :class:`Front`, with failures staged per episode."""

    def __init__(self) -> None:
        super().__init__()
        self.front = Front()
        self.plans: dict[str, dict[int, Injection]] = {}
        self.requests: dict[str, int] = {}
        """Model requests seen per episode (retries and staged failures included)."""

    def stage(self, episode: str, plan: dict[int, Injection]) -> None:
        """Request ``n`` of ``episode`` gets ``plan[n]`` instead of a clean answer."""
        self.plans[episode] = dict(plan)
        self.requests[episode] = 0

    async def start(self) -> None:
        await super().start()
        await self.front.start(super().port)

    async def stop(self) -> None:
        await self.front.stop()
        await super().stop()

    @property
    def port(self) -> int:
        return self.front.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.front.port}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        episode, api = _turn_of(scope)
        if episode is None or api is None or episode not in self.plans:
            await super().__call__(scope, receive, send)
            return
        self.requests[episode] += 1
        injection = self.plans[episode].get(self.requests[episode])
        if injection is None:
            await super().__call__(scope, receive, send)
        elif isinstance(injection, Truncate):
            cut = _Cut(send, injection)
            await super().__call__(scope, receive, cut)
            if not cut.clean_end:
                await self._hang_up(scope, receive)
        else:
            await _drain(receive)
            await self._misbehave(api, injection, scope, receive, send)

    async def _misbehave(self, api: str, injection: Injection, scope: Scope, receive: Receive,
                         send: Send) -> None:
        out = Responder(scope, send)
        if isinstance(injection, Drop):
            await self._hang_up(scope, receive)
        elif isinstance(injection, HttpError):
            headers = {}
            if injection.retry_after_s is not None:
                headers["Retry-After"] = f"{injection.retry_after_s:g}"
            await out.send_json(injection.status,
                                error_body(api, injection.status, injection.message), headers)
        elif isinstance(injection, StreamError):
            await out.open_stream()
            for event, data in failed_stream(api, injection.code):
                await out.chunk(sse(event, data))
            await out.end_stream()

    async def _hang_up(self, scope: Scope, receive: Receive) -> None:
        await self.front.hang_up(scope["client"])
        while (await receive())["type"] != "http.disconnect":
            pass


class StagedThreadedGateway(ThreadedGateway):
    """A :class:`StagedGateway` on its own event loop in a background thread."""

    def __init__(self) -> None:
        super().__init__()
        self.gateway = StagedGateway()


class _Cut:
    """An ASGI ``send`` that passes on only the start of a response: the first ``events`` body
    chunks of a stream (the gateway writes one event per chunk), or the first half of a whole
    body under its full Content-Length."""

    def __init__(self, send: Send, cut: Truncate) -> None:
        self._send, self._cut = send, cut
        self._chunks = 0
        self._streamed = False
        self._done = False
        self.clean_end = False

    async def __call__(self, message: Message) -> None:
        if self._done:
            return
        if message["type"] == "http.response.start":
            types = dict(message.get("headers", []))
            self._streamed = types.get(b"content-type", b"").startswith(b"text/event-stream")
            await self._send(message)
            return
        body = message.get("body", b"")
        if not self._streamed:
            self._done = True
            await self._send({**message, "body": body[: len(body) // 2], "more_body": True})
            return
        if body and self._chunks < self._cut.events:
            self._chunks += 1
            await self._send(message)
        if self._chunks >= self._cut.events or not message.get("more_body"):
            self._done = True
            if self._cut.clean:
                self.clean_end = True
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def _turn_of(scope: Scope) -> tuple[str | None, str | None]:
    """The episode and API of a model request (``POST /ep/<episode>/.../responses``)."""
    match = EPISODE.match(scope.get("path", ""))
    if scope.get("type") != "http" or scope.get("method") != "POST" or match is None:
        return None, None
    rest = match.group(2) or "/"
    api = next((name for suffix, name in ROUTES if rest.endswith(suffix)), None)
    return match.group(1), None if api == "count" else api


async def _drain(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            return


def failed_stream(api: str, code: str) -> list[tuple[str | None, Any]]:
    """A stream that starts, then reports a provider failure, in the API's own events."""
    message = "injected stream failure"
    if api == "responses":
        shell = {"id": "resp_failed", "object": "response", "status": "in_progress", "output": []}
        failed = {**shell, "status": "failed", "error": {"code": code, "message": message}}
        return [("response.created", {"type": "response.created", "sequence_number": 0,
                                      "response": shell}),
                ("response.failed", {"type": "response.failed", "sequence_number": 1,
                                     "response": failed})]
    if api == "chat":
        return [(None, {"error": {"message": message, "type": code, "code": code}})]
    return [("message_start", {"type": "message_start", "message": {
                "id": "msg_failed", "type": "message", "role": "assistant", "model": "",
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0}}}),
            ("error", {"type": "error", "error": {"type": code, "message": message}})]
