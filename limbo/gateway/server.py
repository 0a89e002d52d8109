"""The model gateway: OpenAI Responses, Chat Completions and Anthropic Messages over loopback
HTTP, streaming and not, answered by any :class:`~limbo.episode.models.ModelAdapter`.

A production harness is pointed at ``base_url(episode, api)``; the path prefix
``/ep/<episode>/`` routes each request to that episode's :class:`GatewaySession` (a request
without it may name the episode in an ``X-Limbo-Episode`` header, or, with exactly one session
open, goes to that one). Each request is parsed into the provider-neutral conversation, answered
by the session's adapter, and written back in the same wire format — with the event sequences
the official SDK parsers and the harnesses expect (docs/models.md lists them).

The gateway is an ASGI app. Other per-episode apps can be mounted beside the model routes
(:meth:`Gateway.mount`: the MCP server of an episode lives at ``/ep/<episode>/mcp``), so one
loopback server carries both halves of a production-harness episode. Run it inside an event
loop you own (``await gw.start()``), or on a background thread with :class:`ThreadedGateway`.
It only ever binds a loopback address.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from limbo.base.errors import ModelError, UsageError
from limbo.base.hashing import digest
from limbo.episode.models import EpisodeContext, ModelAdapter, ModelTurn
from limbo.gateway.asgi import (
    LOOPBACK,
    ASGIApp,
    BodyTooLarge,
    HttpRequest,
    LoopbackServer,
    Receive,
    Responder,
    Scope,
    Send,
    read_request,
)
from limbo.gateway.session import GatewaySession
from limbo.providers import chat_api, messages_api, responses_api

log = logging.getLogger("limbo.gateway")
T = TypeVar("T")
EPISODE = re.compile(r"^/ep/([^/]+)(/.*)?$")
ROUTES = (("/chat/completions", "chat"), ("/responses", "responses"),
          ("/messages/count_tokens", "count"), ("/messages", "messages"))
Event = tuple[str | None, Any]


class Gateway:
    """Loopback HTTP server routing model requests to per-episode sessions, and other requests
    under ``/ep/<episode>/<name>`` to apps mounted there."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in LOOPBACK:
            raise UsageError(f"the model gateway binds loopback only (got host {host!r})")
        self.sessions: dict[str, GatewaySession] = {}
        self.mounts: dict[tuple[str, str], ASGIApp] = {}
        self._server = LoopbackServer(self, host, port)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return self._server.url

    def base_url(self, episode: str, api: str = "openai") -> str:
        """What to configure as the harness's base URL: ``.../v1`` for OpenAI clients (they
        append ``/responses`` or ``/chat/completions``), without it for Anthropic clients."""
        prefix = f"{self.url}/ep/{episode}"
        return prefix if api == "anthropic" else f"{prefix}/v1"

    def open(self, episode: str, adapter: ModelAdapter, ctx: EpisodeContext | None = None,
             **options: Any) -> GatewaySession:
        """Start routing ``episode``'s requests to ``adapter``."""
        if episode in self.sessions:
            raise ValueError(f"gateway session {episode!r} is already open")
        session = GatewaySession(episode=episode, adapter=adapter, ctx=ctx, **options)
        self.sessions[episode] = session
        return session

    def close(self, episode: str) -> GatewaySession | None:
        return self.sessions.pop(episode, None)

    def mount(self, episode: str, name: str, app: ASGIApp) -> str:
        """Serve ``app`` at ``/ep/<episode>/<name>`` (its scope's ``root_path`` is that
        prefix); returns the URL."""
        if (episode, name) in self.mounts:
            raise ValueError(f"{name!r} is already mounted for episode {episode!r}")
        self.mounts[(episode, name)] = app
        return f"{self.url}/ep/{episode}/{name}"

    def unmount(self, episode: str, name: str) -> None:
        self.mounts.pop((episode, name), None)

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        match = EPISODE.match(scope["path"])
        if match:
            first = (match.group(2) or "/").split("/")[1]
            app = self.mounts.get((match.group(1), first))
            if app is not None:
                prefix = f"/ep/{match.group(1)}/{first}"
                await app({**scope, "root_path": scope.get("root_path", "") + prefix}, receive,
                          send)
                return
        out = Responder(scope, send)
        try:
            req = await read_request(scope, receive)
        except BodyTooLarge:
            await out.send_json(413, {"error": {"message": "request body too large"}})
            return
        await self.handle(req, out)

    # ------------------------------------------------------------------ requests

    def _session(self, req: HttpRequest) -> tuple[GatewaySession | None, str]:
        match = EPISODE.match(req.path)
        if match:
            return self.sessions.get(match.group(1)), match.group(2) or "/"
        named = req.headers.get("x-limbo-episode")
        if named:
            return self.sessions.get(named), req.path
        only = list(self.sessions.values())
        return (only[0] if len(only) == 1 else None), req.path

    async def handle(self, req: HttpRequest, out: Responder) -> None:
        log.debug("%s %s", req.method, req.path)
        session, rest = self._session(req)
        if session is None:
            await out.send_json(404, {"error": {"message": "no gateway session for this path",
                                                "type": "not_found_error"}})
            return
        if req.method == "GET" and rest.endswith("/models"):
            await out.send_json(200, {"object": "list", "data": [
                {"id": session.adapter.spec, "object": "model", "created": 0, "owned_by": "limbo"}]})
            return
        api = next((name for suffix, name in ROUTES if rest.endswith(suffix)), None)
        if req.method != "POST" or api is None:
            await out.send_json(404, {"error": {"message": f"no route {req.method} {rest}",
                                                "type": "not_found_error"}})
            return
        try:
            body = req.json()
        except ValueError:
            await out.send_json(400, error_body(api, 400, "request body is not JSON"))
            return
        if api == "count":
            await out.send_json(200, {"input_tokens": max(1, len(req.body) // 4)})
            return
        await self._turn(session, api, body, out)

    async def _turn(self, session: GatewaySession, api: str, body: dict[str, Any],
                    out: Responder) -> None:
        stream = bool(body.get("stream"))
        n = session.next_request()
        ns = responses_api.Namespaces()
        try:
            messages, tools = _parse(api, body, ns)
            turn = await session.answer(messages, tools)
        except ModelError as exc:
            session.record(n, api, stream, error=str(exc))
            session.fail(str(exc), model=True)
            await out.send_json(500, error_body(api, 500, f"model failed: {exc}"))
            return
        except Exception as exc:  # answer the harness, keep the reason
            log.exception("gateway turn failed")
            session.record(n, api, stream, error=f"{type(exc).__name__}: {exc}")
            session.fail(f"{type(exc).__name__}: {exc}")
            await out.send_json(500, error_body(api, 500, f"gateway error: {type(exc).__name__}"))
            return
        session.record(n, api, stream, turn=turn.model_dump(mode="json"))
        model = str(body.get("model") or session.adapter.spec)
        tag = f"{digest(session.episode, 10)}_{n}"
        if stream:
            await _write_stream(out, _events(api, turn, model, tag, ns, body))
        else:
            await out.send(200, json.dumps(_body(api, turn, model, tag, ns)).encode())


# ------------------------------------------------------------------ wire formats


def _parse(api: str, body: dict[str, Any], ns: responses_api.Namespaces) -> Any:
    if api == "responses":
        return responses_api.parse_request(body, ns)
    if api == "chat":
        return chat_api.parse_request(body)
    return messages_api.parse_request(body)


def _body(api: str, turn: ModelTurn, model: str, tag: str,
          ns: responses_api.Namespaces) -> dict[str, Any]:
    if api == "responses":
        return responses_api.response_body(turn, model, _ids(tag), ns)
    if api == "chat":
        return chat_api.response_body(turn, model, f"chatcmpl-{tag}")
    return messages_api.response_body(turn, model, f"msg_{tag}")


def _events(api: str, turn: ModelTurn, model: str, tag: str, ns: responses_api.Namespaces,
            body: dict[str, Any]) -> list[Event]:
    if api == "responses":
        return list(responses_api.stream_events(turn, model, _ids(tag), ns))
    if api == "chat":
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return list(chat_api.stream_events(turn, model, f"chatcmpl-{tag}", usage))
    return list(messages_api.stream_events(turn, model, f"msg_{tag}"))


def _ids(tag: str) -> responses_api.Ids:
    return responses_api.Ids(response=f"resp_{tag}", prefix=tag)


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


async def _write_stream(out: Responder, events: list[Event]) -> None:
    await out.open_stream()
    for event, data in events:
        await out.chunk(sse(event, data))
    await out.end_stream()


_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                    529: "overloaded_error"}


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    """An error in the API's own format (the gateway's, and a test's staged one)."""
    if api == "messages":
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                                           "message": message}}
    code = "rate_limit_exceeded" if status == 429 else "server_error" if status >= 500 else None
    kind = "requests" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ------------------------------------------------------------------ on a thread


class ThreadedGateway:
    """A :class:`Gateway` on its own event loop in a background thread (for synchronous
    callers: a runner that spawns harness processes, or tests). A context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.gateway = Gateway(host, port)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Gateway:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.gateway.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.gateway.stop())
            loop.close()

        self._thread = threading.Thread(target=main, name="limbo-gateway", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        return self.gateway

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the gateway's loop (e.g. an adapter's ``aclose``) and wait."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop = self._thread = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
