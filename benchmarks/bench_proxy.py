"""``limbo proxy``: what the proxy adds to one forwarded call, read and write, stdio and HTTP.

    python benchmarks/bench_proxy.py [--calls N] [--blocks B] [--transport stdio|http|both]
                                     [--baseline PYTHON]

The upstream is the SQLite orders server of the tests (tests/support/orders_server.py). The
same ``mcp`` SDK client makes N reads (``list_orders`` of one customer) and N writes
(``create_order``, each another order) twice: straight to the upstream, and through ``limbo
proxy`` (fault ``none``). Over stdio the client starts the proxy, which starts the server; over
HTTP the server runs with ``--http``, the proxy with ``--listen`` and ``--upstream-url``.

Fair: both paths speak the same protocol version (the ``initialize`` handshake's: the SDK's
client would otherwise speak the newer stateless era straight to the server, and the handshake
through the proxy — two different protocols; the version each negotiated is printed and must
agree), run in B alternating blocks (direct, proxied, direct, ...; each way first in its share
of the blocks) so that a machine busy with something else slows both alike, and the load
average is printed at the start and the end, with the share of the machine's CPU time busy and
stolen by the hypervisor over the run.
``--baseline`` adds a third way in the same blocks: the proxy of another checkout (its
environment's ``limbo``, as in :mod:`ab`), so that old and new meet the same load.

Printed per transport and kind: the median and the 99th percentile of the round trip each way,
and the overhead (proxied minus direct, of each); beside them, what one append and sync of a
journal line costs on the journal's disk (median and p99, measured alone: the upstream's own
syncs make it dearer inside the run). Writes are reported apart from reads: the proxy syncs its
journal once per write (the ``intent``, before forwarding it; the ``ack`` goes to disk with the
next sync), which reads never do. Beside the times, the CPU each proxy process spends per
call (user and system time of its main thread, from ``/proc``; the server's own on the direct
way): on a shared machine it moves less than the wall time does.

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
from dataclasses import dataclass, field
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


@dataclass
class Way:
    """One way to the server: ``direct``, ``proxied`` (this checkout's proxy) or ``baseline``
    (another checkout's), what it measured, and the process whose CPU is clocked (the proxy;
    the server itself on the direct way)."""

    name: str
    target: Any
    """How the client reaches it: a :class:`StdioServerParameters` or a URL."""
    limbo: str | None = None
    pid: int | None = None
    times: dict[str, list[float]] = field(default_factory=lambda: {"read": [], "write": []})
    cpu: dict[str, float] = field(default_factory=lambda: {"read": 0.0, "write": 0.0})


@contextlib.contextmanager
def _stdio(db: Path, out: Path, limbos: list[str]) -> Iterator[list[Way]]:
    """The ways to the server over stdio (the client starts each process)."""
    ways = [Way("direct", StdioServerParameters(command=sys.executable,
                                                args=[str(SERVER), str(db)],
                                                env=dict(os.environ)))]
    for name, limbo in zip(("proxied", "baseline"), limbos, strict=False):
        ways.append(Way(name, StdioServerParameters(command=limbo, env=dict(os.environ),
                                                    args=_proxy_args(
            ["--upstream-cmd", f"{sys.executable} {SERVER} {db}"], out / name)), limbo))
    yield ways


@contextlib.contextmanager
def _http(db: Path, out: Path, limbos: list[str]) -> Iterator[list[Way]]:
    """The ways to the server over streamable HTTP: its URL, and each proxy's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVER), str(db), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [server]
    try:
        deadline = time.monotonic() + 30
        with socket.socket() as s:
            while s.connect_ex(("127.0.0.1", port)) != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        direct = f"http://127.0.0.1:{port}/mcp"
        ways = [Way("direct", direct, pid=server.pid)]
        for name, limbo in zip(("proxied", "baseline"), limbos, strict=False):
            proxy = subprocess.Popen(
                [limbo, *_proxy_args(["--upstream-url", direct], out / name), "--listen", "0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True)
            procs.append(proxy)
            assert proxy.stderr is not None
            found = next(m for line in proxy.stderr
                         if (m := re.search(r"http://127\.0\.0\.1:\d+/mcp", line)))
            ways.append(Way(name, found.group(0), limbo, proxy.pid))
        yield ways
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait()


def _children() -> set[int]:
    """The processes this one started (Linux; empty elsewhere)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (task / "children").read_text().split()}
    return found


def _cpu(pid: int | None) -> float:
    """Seconds process ``pid`` has spent on a CPU so far (its main thread, user and system,
    in nanoseconds from ``/proc``; 0 where unknown)."""
    if pid is None:
        return 0.0
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


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


async def _open(stack: contextlib.AsyncExitStack, way: Way, quiet: Any) -> Any:
    """The client of one way (a stdio way's process found among this one's children)."""
    before = _children()
    target = (stdio_client(way.target, errlog=quiet)
              if isinstance(way.target, StdioServerParameters) else way.target)
    client = await stack.enter_async_context(Client(target, mode=MODE, cache=None))
    if way.pid is None:
        started = _children() - before
        way.pid = started.pop() if len(started) == 1 else None
    return client


async def _measure(calls: int, blocks: int, ways: list[Way]) -> list[str]:
    """Time ``calls`` reads and writes each way, in ``blocks`` alternating blocks; the
    protocol versions the ways negotiated (one)."""
    quiet = open(os.devnull, "w")  # the servers' stderr, for the whole run
    async with contextlib.AsyncExitStack() as stack:
        clients = [await _open(stack, way, quiet) for way in ways]
        versions = [c.protocol_version for c in clients]
        if len(set(versions)) != 1:
            raise SystemExit(f"the ways speak different protocols: {versions}")
        await clients[0].call_tool("create_order", {"customer_id": "cus_bench", "sku": "TEE-02",
                                                    "quantity": 2})
        for client in clients:  # warm every path up
            await _block(client, "read", 20, 0)
        per = max(1, calls // blocks)
        paired = list(enumerate(zip(ways, clients, strict=True)))
        for b in range(blocks):
            for kind in ("read", "write"):
                turn = b % len(paired)  # each way goes first in as many blocks as the others
                for i, (way, client) in paired[turn:] + paired[:turn]:
                    used = _cpu(way.pid)
                    way.times[kind] += await _block(client, kind, per, 10_000_000 * i + b * per)
                    way.cpu[kind] += _cpu(way.pid) - used
    return versions


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


def _report(transport: str, ways: list[Way], versions: list[str], sync: tuple[float, float],
            blocks: int) -> None:
    hop = "streamable HTTP on loopback" if transport == "http" else "stdio"
    direct = ways[0]
    print(f"{transport}: every hop {hop}; protocol {versions[0]} on every way; "
          f"{len(direct.times['read'])} calls per kind and way in {blocks} alternating "
          f"blocks; upstream: SQLite orders server; fault none")
    for way in ways[1:]:
        if way.name == "baseline":
            print(f"  baseline: {way.limbo}, proxied in the same blocks")
        for kind in ("read", "write"):
            print("  " + _row(kind, direct, way))
    print("  CPU per call (user + system, main thread): " + "; ".join(
        f"{way.name} {'server' if way is direct else 'proxy'}: read "
        f"{_per_call(way, 'read')}, write {_per_call(way, 'write')}" for way in ways))
    print(f"  journal append + sync (alone, on the journal's disk): median {sync[0]:.3f} ms, "
          f"p99 {sync[1]:.3f} ms")


def _row(kind: str, direct: Way, way: Way) -> str:
    """One kind's median and p99 each way, and the overhead of ``way`` over ``direct``."""
    med = [statistics.median(w.times[kind]) * 1000 for w in (direct, way)]
    p99 = [_p99(w.times[kind]) * 1000 for w in (direct, way)]
    return (f"{kind:5}  median: direct {med[0]:7.3f} ms, {way.name} {med[1]:7.3f} ms, overhead "
            f"{med[1] - med[0]:+7.3f} ms   p99: direct {p99[0]:7.3f} ms, {way.name} "
            f"{p99[1]:7.3f} ms, overhead {p99[1] - p99[0]:+7.3f} ms")


def _per_call(way: Way, kind: str) -> str:
    if way.pid is None or not way.times[kind]:
        return "n/a"
    return f"{way.cpu[kind] / len(way.times[kind]) * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per kind and way")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    parser.add_argument("--baseline", type=Path, metavar="PYTHON",
                        help="the python of a baseline checkout's environment: its limbo proxy "
                             "is a third way, in the same alternating blocks")
    args = parser.parse_args()
    limbos = [LIMBO] + ([str(args.baseline.parent / "limbo")] if args.baseline else [])
    print("load average at the start (1, 5, 15 min): "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")
    before = _cpu_ticks()
    for transport in ("stdio", "http") if args.transport == "both" else (args.transport,):
        with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
            opened = (_http if transport == "http" else _stdio)(Path(tmp) / "orders.db",
                                                                 Path(tmp) / "run", limbos)
            with opened as ways:
                versions = asyncio.run(_measure(args.calls, args.blocks, ways))
            _report(transport, ways, versions, _sync_ms(Path(tmp)), args.blocks)
    print("load average at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(_quiet(before, _cpu_ticks()))


def _cpu_ticks() -> list[int]:
    """The machine's CPU time so far by kind, in ticks (``/proc/stat``'s first line: user,
    nice, system, idle, iowait, irq, softirq, steal); empty where there is no ``/proc``."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return []


def _quiet(before: list[int], after: list[int]) -> str:
    """How quiet the machine was: the share of its CPU time busy and the share the
    hypervisor took (steal) — a virtual machine whose host is busy slows every process alike,
    with no load of its own to show for it."""
    if len(before) < 8 or len(after) < 8:
        return "CPU time by kind: not available here"
    spent = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(spent) or 1
    busy = total - spent[3] - spent[4] - spent[7]
    return f"machine during the run: {busy / total:.0%} busy, {spent[7] / total:.1%} stolen"


if __name__ == "__main__":
    main()
