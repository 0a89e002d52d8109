"""The episode's MCP server with the ``mcp`` SDK's own client (in process, and over streamable
HTTP on loopback): it offers the world's tools with their schemas, answers bad input with the
sandbox's structured errors as MCP tool errors, ends the episode once (``finish`` or a limit),
refuses what comes after without running it, and holds timed-out calls only as asked."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from support.cells import cell_for

from limbo.base.registry import lookup
from limbo.episode.harness import LoopResult
from limbo.gateway.asgi import LoopbackServer
from limbo.harnesses.mcp.server import EpisodeServer, HttpEndpoint
from limbo.sim.config import Limits
from limbo.sim.world import World

CHARGE = {"customer_id": "cus_122", "amount_cents": 37900, "currency": "eur",
          "description": "INV-0031"}


def _server(fault: str = "none", hold_s: float | None = None, **limits: float):
    cell = cell_for("charge_invoice", fault=fault, limits=Limits(**limits))
    world, ended = World.of(cell), []
    server = EpisodeServer(world, lookup("condition", "vanilla")(), LoopResult(), hold_s=hold_s,
                           on_end=ended.append)
    return world, server, ended


def _json(result) -> dict:
    return json.loads(result.content[0].text)


def test_tools_and_their_schemas_are_the_worlds() -> None:
    world, server, _ = _server()

    async def go():
        async with Client(server.server) as client:
            return (await client.list_tools()).tools

    tools = asyncio.run(go())
    assert [t.name for t in tools] == list(world.tools)
    for tool in tools:
        assert tool.input_schema == world.tools[tool.name].schema()
        assert tool.description == world.tools[tool.name].description


@pytest.mark.parametrize(("name", "args", "needle"), [
    ("no_such_tool", {}, "unknown tool"),
    ("billing_create_charge", {"customer_id": "cus_122"}, "amount_cents"),
    ("billing_create_charge", {**CHARGE, "amount_cents": "many"}, "amount_cents"),
    ("billing_create_charge", {**CHARGE, "extra": 1}, "extra"),
    ("billing_create_charge", {**CHARGE, "description": "x" * 100_000}, "description"),
    ("finish", {"status": "done?"}, "status"),
])
def test_bad_calls_are_structured_tool_errors_and_change_nothing(name, args, needle) -> None:
    world, server, ended = _server()

    async def go():
        async with Client(server.server) as client:
            return await client.call_tool(name, args)

    result = asyncio.run(go())
    assert result.is_error
    body = _json(result)
    assert body["error"]["kind"] == "invalid_argument" and needle in body["error"]["message"]
    assert world.ledger == [] and ended == [] and server.out.report is None


def test_finish_ends_the_episode_once_and_later_calls_do_not_run() -> None:
    world, server, ended = _server()

    async def go():
        async with Client(server.server) as client:
            done = await client.call_tool("finish", {"status": "failed", "summary": "stop"})
            late = await client.call_tool("billing_create_charge", CHARGE)
            return done, late

    done, late = asyncio.run(go())
    assert _json(done) == {"ok": True, "finished": True} and ended == ["finished"]
    assert late.is_error and _json(late)["error"]["kind"] == "not_available"
    assert world.ledger == [] and [e["type"] for e in world.log.events] == ["finish"]


def test_the_tool_limit_ends_the_episode_before_the_extra_call_runs() -> None:
    world, server, ended = _server(tool_calls=1)

    async def go():
        async with Client(server.server) as client:
            return [await client.call_tool("billing_create_charge", CHARGE) for _ in range(3)]

    first, second, third = asyncio.run(go())
    assert not first.is_error and second.is_error and third.is_error
    assert ended == ["tool_limit"] and len(world.ledger) == 1
    assert server.out.tool_calls == 1


@pytest.mark.parametrize("hold_s", [None, 0.4])
def test_a_timed_out_call_is_held_only_when_asked_and_the_world_is_already_settled(hold_s) -> None:
    world, server, _ = _server("timeout_post", hold_s=hold_s)

    async def go():
        async with HttpEndpoint(server.server) as endpoint:
            host = LoopbackServer(endpoint)
            await host.start()
            try:
                async with Client(f"{host.url}/mcp") as client:
                    start = time.perf_counter()
                    result = await client.call_tool("billing_create_charge", CHARGE)
                    return result, time.perf_counter() - start
            finally:
                await host.stop()

    result, waited = asyncio.run(go())
    assert _json(result)["error"]["kind"] == "timeout" and len(world.ledger) == 1
    assert world.now == 30.0  # the fault's client timeout, on the sim clock
    assert (waited >= 0.4) if hold_s else (waited < 0.4)


def test_a_client_that_cancels_a_held_call_changes_nothing() -> None:
    world, server, _ = _server("timeout_late", hold_s=30)

    async def go():
        async with HttpEndpoint(server.server) as endpoint:
            host = LoopbackServer(endpoint)
            await host.start()
            try:
                async with Client(f"{host.url}/mcp", mode="legacy") as client:
                    with pytest.raises(MCPError, match="[Tt]imed out"):
                        await client.session.call_tool("billing_create_charge", CHARGE,
                                                       read_timeout_seconds=0.3)
                await server.release()
            finally:
                await host.stop()

    asyncio.run(go())
    assert world.ledger == [] and len(world.inflight) == 1  # still in flight, as the fault says
    world.settle(world.cell.limits.settle_s)
    assert len(world.ledger) == 1 and world.ledger[0]["t"] == 30.0 + 90.0 + 0.0
