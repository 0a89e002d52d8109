"""``limbo proxy``: what the proxy adds to one forwarded call.

    python benchmarks/bench_proxy.py [--calls N] [--blocks B] [--http]

The upstream is the SQLite orders server of the tests (tests/support/orders_server.py). The
same ``mcp`` SDK client makes N reads (``list_orders`` of one customer) and N writes
(``create_order``, each another order) twice: straight to the upstream, and through ``limbo
proxy`` (fault ``none``). By default every hop is stdio (the client starts the proxy, which
starts the server); with ``--http`` every hop is streamable HTTP on loopback (the server runs
with ``--http``, the proxy with ``--listen`` and ``--upstream-url``). The calls run in B
alternating blocks (direct, proxied, direct, ...), so a machine busy with something else slows
both sides alike. Printed per kind: the median round trip seen by the client each way, and the
overhead — the proxied median minus the direct one. Writes are reported apart from reads: the
proxy syncs its journal to disk once per write (the ``intent``, before forwarding it; the
``ack`` goes to disk with the next sync), which reads never do.

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

from limbo.proxy.journal import _DATASYNC

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "support" / "orders_server.py"
WORLD = ROOT / "tests" / "fixtures" / "proxy" / "orders.toml"
LIMBO = str(Path(sys.executable).parent / "limbo")


def _proxy_args(upstream: list[str], out: Path) -> list[str]:
    return ["proxy", *upstream, "--world", str(WORLD), "--task", "orders_place", "--out",
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


async def _measure(calls: int, blocks: int, ways: tuple[Any, Any]
                   ) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {k: {"direct": [], "proxied": []}
                                                for k in ("read", "write")}
    async with Client(ways[0], cache=None) as direct, Client(ways[1], cache=None) as proxied:
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
    return times


def _sync_ms(folder: Path, n: int = 200) -> float:
    """The median cost of appending one line and syncing it as the journal does, where the
    journal lives (on an idle disk: the upstream's own syncs make it dearer in the run)."""
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
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per kind and way")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--http", action="store_true", help="every hop streamable HTTP")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        with (_http if args.http else _stdio)(Path(tmp) / "orders.db", Path(tmp) / "run") as ways:
            times = asyncio.run(_measure(args.calls, args.blocks, ways))
        sync = _sync_ms(Path(tmp))
    hop = "streamable HTTP on loopback" if args.http else "stdio"
    print(f"limbo proxy overhead per forwarded call ({len(times['read']['direct'])} calls per "
          f"kind and way, {args.blocks} alternating blocks; upstream: SQLite orders server; "
          f"every hop {hop}; fault none)")
    for kind in ("read", "write"):
        direct = statistics.median(times[kind]["direct"]) * 1000
        proxied = statistics.median(times[kind]["proxied"]) * 1000
        print(f"  {kind:5}  direct median {direct:7.3f} ms   proxied median {proxied:7.3f} ms   "
              f"overhead {proxied - direct:+7.3f} ms")
    print(f"  a write syncs the journal once; one append + sync here, alone: median "
          f"{sync:.3f} ms")


if __name__ == "__main__":
    main()
