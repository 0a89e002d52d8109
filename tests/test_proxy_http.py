"""The proxy's lean streamable HTTP, both ways, over real loopback sockets: the endpoint an
agent posts to (what it refuses: another host or origin, a GET, a session it never issued or
that ended, garbage, a batch, a body past the limit) and the link to an upstream (a JSON answer,
an event stream with a request of the server's before the answer, a JSON-RPC error, an HTTP
failure without an answer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from limbo.proxy import http as proxy_http
from limbo.proxy.http import AgentEndpoint, serving
from limbo.proxy.httplink import HttpLink
from limbo.proxy.wire import ChannelClosed, RpcError

Post = Callable[..., Awaitable[tuple[int, dict[str, str], Any]]]


async def _echo(message: dict[str, Any]) -> Any:
    if message["method"] == "boom":
        raise RpcError(-32000, "refused")
    return {"echo": message["method"]}


def _with_endpoint(body: Callable[[str, Post], Awaitable[None]]) -> None:
    async def go() -> None:
        released = asyncio.Event()  # what a held request waits for: the agent's cancel

        async def answer(message: dict[str, Any]) -> Any:
            if message["method"] == "hold":
                await released.wait()
            return await _echo(message)

        endpoint = AgentEndpoint(answer, on_cancel=lambda request: released.set())
        async with serving(endpoint, 0) as url, aiohttp.ClientSession() as http:
            async def post(data: Any, headers: dict[str, str] | None = None,
                           method: str = "POST") -> tuple[int, dict[str, str], Any]:
                raw = data if isinstance(data, bytes) else json.dumps(data).encode()
                async with http.request(method, f"{url}/mcp", data=raw,
                                        headers=headers or {}) as response:
                    text = await response.read()
                    return (response.status, {k.lower(): v for k, v in response.headers.items()},
                            json.loads(text) if text else None)
            await body(url, post)
    asyncio.run(go())


def test_the_endpoint_answers_requests_and_issues_a_session() -> None:
    async def body(url: str, post: Post) -> None:
        status, headers, answer = await post({"jsonrpc": "2.0", "id": 1, "method": "initialize"})
        assert status == 200 and answer == {"jsonrpc": "2.0", "id": 1,
                                            "result": {"echo": "initialize"}}
        session = {"mcp-session-id": headers["mcp-session-id"]}
        assert (await post({"jsonrpc": "2.0", "id": 2, "method": "boom"}, session))[2] == {
            "jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "refused"}}
        assert (await post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                           session))[0] == 202
        assert (await post(b"", session, method="DELETE"))[0] == 200
        assert (await post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, session))[0] == 404
        assert (await post({"jsonrpc": "2.0", "id": 4, "method": "ping"},
                           {"mcp-session-id": "limbo-proxy-99"}))[0] == 404

    _with_endpoint(body)


def test_the_endpoint_refuses_what_is_not_one_local_json_rpc_message(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proxy_http, "LINE_LIMIT", 1000)

    async def body(url: str, post: Post) -> None:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await post(ping, {"host": "evil.example:80"}))[0] == 403
        assert (await post(ping, {"origin": "http://evil.example"}))[0] == 403
        assert (await post(ping, {"origin": "null"}))[0] == 403
        assert (await post(ping, {"origin": "http://localhost:3000"}))[0] == 200
        status, headers, _ = await post(b"", method="GET")
        assert status == 405 and headers["allow"] == "POST, DELETE"
        assert (await post(b"\xff\xfe not json"))[2]["error"]["code"] == -32700
        status, _, answer = await post([ping, ping])
        assert status == 400 and answer["error"]["code"] == -32600
        status, _, answer = await post({**ping, "params": {"pad": "x" * 2000}})
        assert status == 413 and answer["error"]["message"] == "message too long"

    _with_endpoint(body)


def test_a_request_needs_a_session_and_may_be_cancelled() -> None:
    """Nothing but initialize, ping and the stateless probe is served without a session (a
    tool call sent first never reaches the upstream); a ``notifications/cancelled`` ends the
    request it names, which is answered as cancelled."""
    async def body(url: str, post: Post) -> None:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}
        status, _, answer = await post(call)
        assert status == 400 and answer["error"]["code"] == -32600
        assert (await post({"jsonrpc": "2.0", "id": 2, "method": "ping"}))[0] == 200
        _, headers, _ = await post({"jsonrpc": "2.0", "id": 3, "method": "initialize"})
        session = {"mcp-session-id": headers["mcp-session-id"]}
        held = asyncio.ensure_future(post({"jsonrpc": "2.0", "id": "h", "method": "hold"},
                                          session))
        await asyncio.sleep(0.2)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": "h"}}
        assert (await post(cancel, session))[0] == 202
        status, _, answer = await asyncio.wait_for(held, 10)
        assert answer["error"] == {"code": -32800, "message": "request cancelled"}

    _with_endpoint(body)


# -- the link to an upstream ----------------------------------------------------------------------


def _upstream(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
              ) -> Callable[[], Any]:
    """A stand-in upstream on a free loopback port, as an async context manager: its URL."""
    class Running:
        async def __aenter__(self) -> str:
            app = web.Application()
            app.router.add_post("/mcp", handler)
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            port = self.runner.addresses[0][1]
            return f"http://127.0.0.1:{port}/mcp"

        async def __aexit__(self, *exc: object) -> None:
            await self.runner.cleanup()

    return Running


def test_the_link_reads_an_event_stream_and_answers_the_servers_request_on_it() -> None:
    seen: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        seen.append({"headers": {k.lower(): v for k, v in request.headers.items()}, **message})
        if message.get("method") == "initialize":
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": "2025-06-18"}}, headers={"mcp-session-id": "s-1"})
        if "method" not in message:  # our answer to the server's ping
            return web.Response(status=202)
        stream = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await stream.prepare(request)
        for event in ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
                      {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"},
                      {"jsonrpc": "2.0", "id": message["id"], "result": {"ok": 1}}):
            await stream.write(f"event: message\ndata: {json.dumps(event)}\n\n".encode())
        await stream.write_eof()
        return stream

    async def asked(message: dict[str, Any]) -> Any:
        return {} if message.get("method") == "ping" else None

    async def go() -> Any:
        async with _upstream(handler)() as url:
            link = HttpLink(url, {"authorization": "Bearer t"}, asked)
            try:
                await link.request("initialize", {"protocolVersion": "2025-06-18"})
                answer = await link.request("tools/call", {"name": "x"})
                for _ in range(100):  # the answer to the server's ping is posted beside
                    if len(seen) == 3:
                        break
                    await asyncio.sleep(0.01)
            finally:
                await link.aclose()
            return answer

    assert asyncio.run(go()) == {"ok": 1}
    init, call, pong = seen
    assert call["headers"]["mcp-session-id"] == "s-1"
    assert call["headers"]["mcp-protocol-version"] == "2025-06-18"
    assert call["headers"]["authorization"] == "Bearer t"
    assert pong["id"] == "srv-1" and pong["result"] == {}


@pytest.mark.parametrize("reply, raised", [
    (lambda ident: web.json_response({"jsonrpc": "2.0", "id": ident,
                                      "error": {"code": -32602, "message": "bad"}}), RpcError),
    (lambda ident: web.json_response({"jsonrpc": "2.0", "id": ident,
                                      "error": {"code": "x", "message": None}}), RpcError),
    (lambda ident: web.Response(status=500, text="Internal Server Error"), ChannelClosed),
    (lambda ident: web.json_response({"jsonrpc": "2.0", "id": ident}), ChannelClosed),
])
def test_the_link_tells_a_refusal_from_a_lost_answer(reply: Callable[[Any], web.Response],
                                                      raised: type[Exception]) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return reply((await request.json())["id"])

    async def go() -> None:
        async with _upstream(handler)() as url:
            link = HttpLink(url, {}, _echo)
            try:
                with pytest.raises(raised):
                    await link.request("tools/call", {"name": "x"})
            finally:
                await link.aclose()

    asyncio.run(go())


def test_the_link_to_nothing_is_closed() -> None:
    async def go() -> None:
        async with _upstream(_refuse)() as url:
            pass  # the port is free again
        link = HttpLink(url, {}, _echo)
        try:
            with pytest.raises(ChannelClosed, match="ClientConnectorError"):
                await link.request("initialize", {})
        finally:
            await link.aclose()

    asyncio.run(go())


async def _refuse(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500)


def test_the_link_reads_an_event_of_any_size_and_reopens_a_forgotten_session() -> None:
    """An event whose data is 3 MB (past aiohttp's line limit), then an upstream that forgot
    the session (a restart): the link opens a new one and sends the request in it, once."""
    inits: list[str] = []
    forgotten = {"s-1"}

    async def handler(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        if request.headers.get("mcp-session-id") in forgotten:
            return web.Response(status=404)
        if message.get("method") == "initialize":
            inits.append(f"s-{len(inits) + 1}")
            return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": {
                "protocolVersion": "2025-06-18"}}, headers={"mcp-session-id": inits[-1]})
        if "id" not in message:
            return web.Response(status=202)
        stream = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await stream.prepare(request)
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
            "pad": "p" * 3_000_000, "session": request.headers["mcp-session-id"]}})
        await stream.write(b"event: message\r\ndata: " + body.encode() + b"\r\n\r\n")
        await stream.write_eof()
        return stream

    async def go() -> Any:
        async with _upstream(handler)() as url:
            link = HttpLink(url, {}, _echo)
            try:
                await link.request("initialize", {"protocolVersion": "2025-06-18"})
                return await link.request("tools/call", {"name": "x"})
            finally:
                await link.aclose()

    answer = asyncio.run(go())
    assert len(answer["pad"]) == 3_000_000 and answer["session"] == "s-2"
    assert inits == ["s-1", "s-2"]
