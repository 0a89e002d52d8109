"""Production harnesses: wall time per episode for each installed harness, and what the sandbox
itself adds to one tool call served over MCP.

    python benchmarks/bench_harnesses.py [--episodes N] [--calls N] [--concurrency N]

* per harness: N episodes of ``charge_invoice`` under ``policy/verify`` (faults none,
  http500_post, timeout_post in turn — a timeout costs the harness's tool timeout in wall time),
  run one at a time, then all at once ``--concurrency`` at a time; the minimal loop for scale;
* per tool call over MCP, over streamable HTTP on loopback in both protocol eras: the median
  time the sandbox's server spends on one ``tools/call`` request (from the ASGI app being
  called to its answer: the MCP SDK's server, the tool layer, the boundary, the simulation,
  JSON), the median round trip seen by the ``mcp`` SDK's client (its own costs included), and
  the median time inside the tool handler alone.

Prints figures; asserts nothing (tests never time anything).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from limbo.base.registry import entries, lookup
from limbo.episode.harness import LoopResult
from limbo.episode.run_one import arun_episode
from limbo.gateway.asgi import LoopbackServer
from limbo.harnesses.mcp.server import EpisodeServer, HttpEndpoint
from limbo.sim.cell import Cell
from limbo.sim.config import Limits
from limbo.sim.tasks import templates
from limbo.sim.world import World

FAULTS = ("none", "http500_post", "timeout_post")
READ = ("billing_list_charges", {"customer_id": "cus_122"})


def _cell(harness: str, fault: str, **kw: object) -> Cell:
    t = templates()["charge_invoice"]
    return Cell(model="policy/verify", harness=harness, fault=fault, service=t.service,
                template=t.id, focal_write=t.focal_writes[0], **kw)


async def _timed(cell: Cell) -> tuple[float, str]:
    start = time.perf_counter()
    record = await arun_episode(cell)
    return time.perf_counter() - start, record["outcome"]["termination"]


async def _episodes(harness: str, n: int, concurrency: int) -> tuple[list[float], float, int]:
    cells = [_cell(harness, FAULTS[i % len(FAULTS)], seed=i) for i in range(n)]
    one_by_one = [await _timed(c) for c in cells]
    sem = asyncio.Semaphore(concurrency)

    async def limited(c: Cell) -> tuple[float, str]:
        async with sem:
            return await _timed(c)

    start = time.perf_counter()
    together = await asyncio.gather(*(limited(c) for c in cells))
    batch = time.perf_counter() - start
    broken = sum(term != "finished" for _, term in [*one_by_one, *together])
    return [w for w, _ in one_by_one], batch, broken


def _server() -> EpisodeServer:
    cell = _cell("minimal", "none", limits=Limits(tool_calls=10**6, agent_time_s=1e12))
    return EpisodeServer(World.of(cell), lookup("condition", "vanilla")(), LoopResult())


class Served:
    """An ASGI wrapper timing each request on the server: from the app being called to its
    last byte handed to the server (HTTP parsing, the MCP SDK, the tool layer, the world)."""

    def __init__(self, app: Any) -> None:
        self.app, self.timings = app, []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        start = time.perf_counter()
        await self.app(scope, receive, send)
        self.timings.append(time.perf_counter() - start)


async def _mcp_round_trips(calls: int) -> dict[str, tuple[float, float]]:
    """Median (client round trip, server share) in ms, per protocol era."""
    from mcp import Client

    out = {}
    for mode in ("legacy", "auto"):
        server = _server()
        async with HttpEndpoint(server.server) as endpoint:
            served = Served(endpoint)
            host = LoopbackServer(served)
            await host.start()
            async with Client(f"{host.url}/mcp", mode=mode) as client:
                await client.call_tool(*READ)
                served.timings.clear()
                timings = []
                for _ in range(calls):
                    start = time.perf_counter()
                    await client.call_tool(*READ)
                    timings.append(time.perf_counter() - start)
                server_side = list(served.timings)
            await host.stop()
        out[mode] = (statistics.median(timings) * 1e3, statistics.median(server_side) * 1e3)
    return out


async def _handler(calls: int) -> float:
    import mcp_types as types

    server, timings = _server(), []
    params = types.CallToolRequestParams(name=READ[0], arguments=READ[1])
    for _ in range(calls):
        start = time.perf_counter()
        await server._call_tool(None, params)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    for name, cls in entries("harness").items():
        if not getattr(cls, "availability", lambda: (True, ""))()[0]:
            print(f"{name:<12} not installed: skipped")
            continue
        walls, batch, broken = asyncio.run(_episodes(name, args.episodes, args.concurrency))
        print(f"{name:<12} wall per episode: median {statistics.median(walls):6.2f} s, "
              f"max {max(walls):6.2f} s (one at a time); {args.episodes} at concurrency "
              f"{args.concurrency}: {batch:6.2f} s, {batch / args.episodes:5.2f} s per episode"
              + (f"; {broken} did not finish" if broken else ""))
    trips = asyncio.run(_mcp_round_trips(args.calls))
    for mode, (trip, served) in trips.items():
        print(f"MCP tools/call over streamable HTTP ({mode} protocol era): median {served:.2f} ms "
              f"in the sandbox's server per request; {trip:.2f} ms round trip from the SDK client")
    print(f"inside the server's handler: median {asyncio.run(_handler(args.calls)):.3f} ms")


if __name__ == "__main__":
    main()
