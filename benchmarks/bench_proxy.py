"""``limbo proxy``: what the proxy adds to one forwarded call, read and write, stdio and HTTP.

    python benchmarks/bench_proxy.py [--calls N] [--blocks B] [--transport stdio|http|both]

The upstream is the SQLite orders server of the tests (tests/support/orders_server.py). The
same ``mcp`` SDK client makes N reads (``list_orders`` of one customer) and N writes
(``create_order``, each another order) twice: straight to the upstream, and through ``limbo
proxy`` (fault ``none``). Over stdio the client starts the proxy, which starts the server; over
HTTP the server runs with ``--http``, the proxy with ``--listen`` and ``--upstream-url``.

Fair: both paths speak the same protocol version (the ``initialize`` handshake's: the SDK's
client would otherwise speak the newer stateless era straight to the server, and the handshake
through the proxy — two different protocols; the version each negotiated is printed and must
agree), run in B alternating blocks (direct, proxied, direct, ...) so that a machine busy with
something else slows both alike, and the load average is printed at the start and the end.

Printed per transport and kind: the median and the 99th percentile of the round trip each way,
and the overhead (proxied minus direct, of each); beside them, what one append and sync of a
journal line costs on the journal's disk (median and p99, measured alone: the upstream's own
syncs make it dearer inside the run). Writes are reported apart from reads: the proxy syncs its
journal once per write (the ``intent``, before forwarding it; the ``ack`` goes to disk with the
next sync), which reads never do.

Prints figures; asserts nothing (tests never time anything).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from limbo.proxy.journal import _DATASYNC

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "support" / "orders_server.py"
WORLD = ROOT / "tests" / "fixtures" / "proxy" / "orders.toml"
LIMBO = str(Path(sys.executable).parent / "limbo")
MODE = "legacy"
"""The protocol both paths speak: the ``initialize`` handshake (the proxy's)."""


def _proxy_args(upstream: list[str], out: Path) -> list[str]:
    return ["proxy", *upstream, "--world", str(WORLD), "--template", "orders_place", "--out",
            str(out)]


@contextlib.contextmanager
def _stdio(db: Path, out: Path) -> Iterator[tuple[Any, Any]]:
    """The two ways to the server over stdio (the client starts each process)."""
    direct = StdioServerParameters(command=sys.executable, args=[str(SERVER), str(db)],
                                   env=dict(os.environ))
    proxied = StdioServerParameters(command=LIMBO, env=dict(os.environ), args=_proxy_args(
        ["--upstream-cmd", f"{sys.executable} {SERVER} {db}"], out))
    yield direct, proxied


@contextlib.contextmanager
def _http(db: Path, out: Path) -> Iterator[tuple[Any, Any]]:
    """The two ways to the server over streamable HTTP: its URL, and the proxy's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVER), str(db), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        deadline = time.monotonic() + 30
        with socket.socket() as s:
            while s.connect_ex(("127.0.0.1", port)) != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        direct = f"http://127.0.0.1:{port}/mcp"
        proxy = subprocess.Popen([LIMBO, *_proxy_args(["--upstream-url", direct], out),
                                  "--listen", "0"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proxy.stderr is not None
        found = next(m for line in proxy.stderr
                     if (m := re.search(r"http://127\.0\.0\.1:\d+/mcp", line)))
        yield direct, found.group(0)
    finally:
        for proc in (proxy, server):
            if proc is not None:
                proc.terminate()
                proc.wait()


async def _block(client: Any, kind: str, n: int, start: int) -> list[float]:
    out = []
    for i in range(start, start + n):
        if kind == "read":
            name, args = "list_orders", {"customer_id": "cus_bench"}
        else:
            name, args = "create_order", {"customer_id": f"cus_{i}", "sku": "MUG-01",
                                          "quantity": 1}
        began = time.perf_counter()
        result = await client.call_tool(name, args)
        out.append(time.perf_counter() - began)
        assert not result.is_error, result
    return out


Times = dict[str, dict[str, list[float]]]


async def _measure(calls: int, blocks: int, ways: tuple[Any, Any]) -> tuple[Times, list[str]]:
    times: Times = {k: {"direct": [], "proxied": []} for k in ("read", "write")}
    quiet = open(os.devnull, "w")  # the servers' stderr, for the whole run
    direct_way, proxied_way = (stdio_client(w, errlog=quiet)
                               if isinstance(w, StdioServerParameters) else w for w in ways)
    async with Client(direct_way, mode=MODE, cache=None) as direct, \
            Client(proxied_way, mode=MODE, cache=None) as proxied:
        versions = [direct.protocol_version, proxied.protocol_version]
        if versions[0] != versions[1]:
            raise SystemExit(f"the two paths speak different protocols: {versions}")
        await direct.call_tool("create_order", {"customer_id": "cus_bench", "sku": "TEE-02",
                                                "quantity": 2})
        for client in (direct, proxied):  # warm both paths up
            await _block(client, "read", 20, 0)
        per = max(1, calls // blocks)
        for b in range(blocks):
            for kind in ("read", "write"):
                for way, client in (("direct", direct), ("proxied", proxied)):
                    start = 10_000_000 * (way == "proxied") + b * per
                    times[kind][way] += await _block(client, kind, per, start)
    return times, versions


def _sync_ms(folder: Path, n: int = 300) -> tuple[float, float]:
    """Median and p99 of appending one line and syncing it as the journal does, where the
    journal lives (alone: the upstream's own syncs make it dearer in the run)."""
    path = folder / "sync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(n):
            began = time.perf_counter()
            os.write(fd, b"x" * 200 + b"\n")
            _DATASYNC(fd)
            times.append(time.perf_counter() - began)
    finally:
        os.close(fd)
    return statistics.median(times) * 1000, _p99(times) * 1000


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _report(transport: str, times: Times, versions: list[str], sync: tuple[float, float],
            blocks: int) -> None:
    hop = "streamable HTTP on loopback" if transport == "http" else "stdio"
    print(f"{transport}: every hop {hop}; protocol {versions[0]} both ways; "
          f"{len(times['read']['direct'])} calls per kind and way in {blocks} alternating "
          f"blocks; upstream: SQLite orders server; fault none")
    for kind in ("read", "write"):
        med = {w: statistics.median(times[kind][w]) * 1000 for w in ("direct", "proxied")}
        p99 = {w: _p99(times[kind][w]) * 1000 for w in ("direct", "proxied")}
        print(f"  {kind:5}  median: direct {med['direct']:7.3f} ms, proxied "
              f"{med['proxied']:7.3f} ms, overhead {med['proxied'] - med['direct']:+7.3f} ms"
              f"   p99: direct {p99['direct']:7.3f} ms, proxied {p99['proxied']:7.3f} ms, "
              f"overhead {p99['proxied'] - p99['direct']:+7.3f} ms")
    print(f"  journal append + sync (alone, on the journal's disk): median {sync[0]:.3f} ms, "
          f"p99 {sync[1]:.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per kind and way")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    args = parser.parse_args()
    print("load average at the start (1, 5, 15 min): "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")
    for transport in ("stdio", "http") if args.transport == "both" else (args.transport,):
        with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
            ways = (_http if transport == "http" else _stdio)(Path(tmp) / "orders.db",
                                                               Path(tmp) / "run")
            with ways as pair:
                times, versions = asyncio.run(_measure(args.calls, args.blocks, pair))
            _report(transport, times, versions, _sync_ms(Path(tmp)), args.blocks)
    print("load average at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
