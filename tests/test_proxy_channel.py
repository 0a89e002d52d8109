"""The proxy's stdio channel on its own, over real pipes: what it does with answers of
any shape, lines past its limit and answers it cannot read (the request they name fails at
once, rather than waiting out its timeout), a ``notifications/cancelled`` (the request stops
and gets no answer), and a handler that fails (an internal error; the channel reads on)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from limbo.proxy.channel import Channel
from limbo.proxy.wire import ChannelClosed, Handler, RpcError


async def _nothing(message: dict[str, Any]) -> Any:
    return None


async def _paired(handler: Handler = _nothing, server: bool = False, limit: int = 1 << 16
                  ) -> tuple[Channel, asyncio.Future[None], asyncio.StreamReader, Any]:
    """A channel over a pair of pipes, serving (``server``: as the agent's side, else as the
    proxy's to a stdio upstream), and the other end's reader and writer."""
    loop = asyncio.get_running_loop()
    theirs, to_us = os.pipe()
    to_them, ours = os.pipe()
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, open(ours, "wb", buffering=0))
    channel = Channel(writer, handler, server=server, limit=limit)
    channel.read(theirs)
    peer_in = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(peer_in),
                                 open(to_them, "rb", buffering=0))
    peer_out, _ = await loop.connect_write_pipe(asyncio.Protocol, open(to_us, "wb", buffering=0))
    return channel, asyncio.ensure_future(channel.serve()), peer_in, peer_out


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n"


def test_an_unanswered_request_times_out_and_its_late_answer_is_dropped() -> None:
    async def go() -> Any:
        channel, serving, peer_in, peer_out = await _paired()
        with pytest.raises(TimeoutError):
            await channel.request("tools/call", {"name": "create_order"}, timeout=0.05)
        first = json.loads(await peer_in.readline())  # it did go out: its outcome is unknown
        second = asyncio.ensure_future(channel.request("ping", timeout=5.0))
        ping = json.loads(await peer_in.readline())
        for ident, result in ((first["id"], {"late": True}), (ping["id"], {"pong": True})):
            peer_out.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()
                           + b"\n")
        answer = await second
        peer_out.close()
        await serving
        return answer

    assert asyncio.run(go()) == {"pong": True}


def test_answers_of_any_shape_leave_the_channel_serving() -> None:
    """An id that is no number, an error whose code is no integer: the request gets an error,
    and the channel goes on serving."""
    async def go() -> tuple[RpcError, Any]:
        channel, serving, peer_in, peer_out = await _paired()
        first = asyncio.ensure_future(channel.request("tools/call", timeout=5.0))
        ident = json.loads(await peer_in.readline())["id"]
        for answer in ({"id": [ident], "result": {}}, {"id": {"a": 1}, "result": {}},
                       {"id": ident, "error": {"code": "abc", "message": ["not", "text"]}}):
            peer_out.write(json.dumps({"jsonrpc": "2.0", **answer}).encode() + b"\n")
        with pytest.raises(RpcError) as refused:
            await first
        second = asyncio.ensure_future(channel.request("ping", timeout=5.0))
        ident = json.loads(await peer_in.readline())["id"]
        peer_out.write(json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"ok": 1}}).encode()
                       + b"\n")
        answer = await second
        peer_out.close()
        await serving
        return refused.value, answer

    error, answer = asyncio.run(go())
    assert error.code == -32603 and error.message == "['not', 'text']" and answer == {"ok": 1}


def test_an_unreadable_answer_fails_its_request_at_once() -> None:
    """An answer nested too deep, with a lone surrogate, or past the line limit: the request
    it names fails now (its write is then reconciled), not after its timeout; the channel
    reads on."""
    async def go() -> list[str]:
        channel, serving, peer_in, peer_out = await _paired(limit=16_384)
        seen = []
        for bad in ('"result": ' + "[" * 5000 + "]" * 5000, '"result": {"a": "\\udc00"}',
                    '"result": {"pad": "' + "p" * 20_000 + '"}'):
            call = asyncio.ensure_future(channel.request("tools/call", timeout=30.0))
            ident = json.loads(await peer_in.readline())["id"]
            peer_out.write(f'{{"jsonrpc": "2.0", "id": {ident}, {bad}}}\n'.encode())
            with pytest.raises(ChannelClosed) as lost:
                await asyncio.wait_for(call, 10)
            seen.append(str(lost.value))
        ping = asyncio.ensure_future(channel.request("ping", timeout=5.0))
        ident = json.loads(await peer_in.readline())["id"]
        peer_out.write(_line({"id": ident, "result": {"ok": 1}}))
        assert await ping == {"ok": 1}
        peer_out.close()
        await serving
        return seen

    reasons = asyncio.run(go())
    assert "nested deeper than 100" in reasons[0] and "surrogate" in reasons[1]
    assert "longer than 16384 bytes" in reasons[2]


def test_the_agent_side_answers_what_is_no_message_and_reads_on() -> None:
    async def go() -> list[dict[str, Any]]:
        channel, serving, peer_in, peer_out = await _paired(_echo, server=True, limit=4096)
        peer_out.write(b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"p": "'
                       + b"x" * 10_000 + b'"}}\n')
        peer_out.write(b"[" + _line({"id": 4, "method": "ping"}).strip() + b"]\n")
        peer_out.write(_line({"id": 5, "method": "boom"}))
        peer_out.write(_line({"id": 6, "method": "ping"}))
        answers = [json.loads(await peer_in.readline()) for _ in range(4)]
        peer_out.close()
        await serving
        return answers

    failures: list[BaseException] = []

    async def _echo(message: dict[str, Any]) -> Any:
        if message["method"] == "boom":
            failures.append(KeyError("a bug"))
            raise failures[-1]
        return {"echo": message["method"]}

    by_id = {a["id"]: a for a in asyncio.run(go())}
    assert by_id[3]["error"] == {"code": -32700, "message": "message longer than 4096 bytes"}
    assert by_id[4]["error"]["code"] == -32600  # a batch
    assert by_id[5]["error"] == {"code": -32603, "message": "limbo proxy failed: KeyError"}
    assert by_id[6]["result"] == {"echo": "ping"}


def test_a_cancelled_request_is_told_and_gets_no_answer() -> None:
    """MCP's cancellation: ``on_cancel`` hears of the request (the proxy ends a held call
    there), and its answer is not sent; the channel answers the next request."""
    async def go() -> tuple[list[dict[str, Any]], list[Any]]:
        told: list[Any] = []
        release, started = asyncio.Event(), asyncio.Event()

        async def held(message: dict[str, Any]) -> Any:
            if message["method"] == "tools/call":
                started.set()
                await release.wait()
                return {"late": True}
            return {}

        def cancel(request: dict[str, Any]) -> None:
            told.append(request["id"])
            release.set()

        channel, serving, peer_in, peer_out = await _paired(held, server=True)
        channel.on_cancel = cancel
        peer_out.write(_line({"id": "held-1", "method": "tools/call"}))
        await asyncio.wait_for(started.wait(), 10)
        peer_out.write(_line({"method": "notifications/cancelled",
                              "params": {"requestId": "held-1"}}))
        peer_out.write(_line({"id": 7, "method": "ping"}))
        answers = [json.loads(await peer_in.readline())]
        await channel.drain()
        peer_out.close()
        await serving
        return answers, told

    answers, told = asyncio.run(go())
    assert answers == [{"jsonrpc": "2.0", "id": 7, "result": {}}] and told == ["held-1"]


def test_lines_are_read_whatever_the_reads_cut_them_into() -> None:
    """Several messages in one read, one message over several reads (its newline last, or
    none at all before the other side closes): each is handled once, whole."""
    async def go() -> list[dict[str, Any]]:
        channel, serving, peer_in, peer_out = await _paired(_echo, server=True, limit=4096)
        peer_out.write(b"".join(_line({"id": i, "method": f"m{i}"}) for i in range(3)))
        split = _line({"id": 3, "method": "m3", "params": {"pad": "p" * 3000}})
        for cut in (split[:7], split[7:2000], split[2000:-1], split[-1:]):
            peer_out.write(cut)
            await asyncio.sleep(0.02)  # each piece its own read
        peer_out.write(_line({"id": 4, "method": "m4"}).strip())  # no newline: the last line
        answers = [json.loads(await peer_in.readline()) for _ in range(4)]
        await asyncio.sleep(0.02)
        peer_out.close()
        await serving
        answers.append(json.loads(await peer_in.readline()))
        return answers

    async def _echo(message: dict[str, Any]) -> Any:
        return {"echo": message["method"]}

    answers = asyncio.run(go())
    assert sorted((a["id"], a["result"]["echo"]) for a in answers) == [
        (i, f"m{i}") for i in range(5)]


def test_an_answer_passed_on_unchanged_goes_as_the_bytes_it_came_in() -> None:
    """The upstream's result reaches the agent byte for byte (``1.50`` stays ``1.50``, an
    escape stays an escape), under the agent's own id; an answer holding NaN is read as
    usual (NaN as a string, strict JSON) and written anew."""
    async def go() -> list[bytes]:
        upstream, up_serving, up_in, up_out = await _paired()

        async def forward(message: dict[str, Any]) -> Any:
            return await upstream.request("tools/call", timeout=5.0)

        agent, agent_serving, agent_in, agent_out = await _paired(forward, server=True)
        answers = []
        for body in (b'{"items": [{"name": "caf\\u00e9", "n": 1.50}], "note": "\xc3\xa9"}',
                     b'{"n": NaN}'):
            agent_out.write(_line({"id": "a-1", "method": "tools/call"}))
            ident = json.loads(await up_in.readline())["id"]
            up_out.write(b'{"jsonrpc": "2.0", "id": %d, "result": %s}\n' % (ident, body))
            answers.append(await agent_in.readline())
        for peer in (up_out, agent_out):
            peer.close()
        await asyncio.gather(up_serving, agent_serving)
        return answers

    exact, renewed = asyncio.run(go())
    assert exact == (b'{"jsonrpc":"2.0","id":"a-1","result":{"items": [{"name": "caf\\u00e9", '
                     b'"n": 1.50}], "note": "\xc3\xa9"}}\n')
    assert json.loads(renewed) == {"jsonrpc": "2.0", "id": "a-1", "result": {"n": "NaN"}}
