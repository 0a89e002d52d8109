"""Must-show 3 of issue 36: the proxy fuzzed from both sides, seeded, bounded in time.

The agent's side: ``limbo proxy`` over stdio in front of the SQLite orders server, fed frames
from a seeded generator — proper requests and random JSON values, nested shallow and 100,000
deep, small and a megabyte long, in UTF-8, UTF-16, broken UTF-8 and lone surrogates, batches,
ids of every type, answers to nothing, truncated lines. Python's own ``json`` is the oracle: a
frame it reads as a request with a string or integer id must be answered exactly once, under
that id; no id is answered twice; and the proxy serves to the end, where the ledger equals the
database and the journal is valid JSON.

The upstream's side: the proxy in front of :mod:`support.wild_upstream`, which answers
``create_order`` garbage, nothing, under the wrong id, 3 MB long, 100,000 deep, with a lone
surrogate, ... (seeded). Every call the SDK's client makes is answered within the scaled
timeout (120 s × 0.01, and slack for a loaded machine); reconciliation settles what was lost;
the ledger equals the database and the journal is valid JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from support.orders_server import rows
from support.proxy_runs import (
    LIMBO,
    WORLD,
    before_ids,
    database,
    ledger,
    proxy_args,
    wait_for_record,
)

SCALED_TIMEOUT_S = 120 * 0.01
SLACK_S = 20.0
"""What a machine shared with other work may add to the scaled timeout."""
WILD = Path(__file__).resolve().parent / "support" / "wild_upstream.py"
TEXT = "aZ09 _-/.:é漢🙂\t\\\"\u0000\u2028"


def _text(rng: random.Random, n: int | None = None) -> str:
    return "".join(rng.choice(TEXT) for _ in range(n if n is not None else rng.randint(0, 12)))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False, 0, -1, 2**63, 1.5e300, -0.0])
    if kind in (1, 2):
        return _text(rng)
    if kind in (3, 4):
        return rng.randint(-10, 10)
    if kind == 5:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_text(rng): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


class Frames:
    """Seeded frames for the agent's side, each with the ids it uses."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 100

    def ident(self) -> Any:
        self.n += 1
        return self.rng.choice([self.n, self.n, f"s-{self.n}", str(self.n)])

    def request(self) -> dict[str, Any]:
        rng = self.rng
        calls = [("tools/call", {"name": "list_orders", "arguments": {}}),
                 ("tools/call", {"name": rng.choice(["create_order", "orders_create_order"]),
                                 "arguments": {"customer_id": _text(rng, 8),
                                               "sku": _text(rng, 6),
                                               "quantity": rng.choice([1, 2, "x", None, 3])}}),
                 ("tools/call", {"name": "refund_order",
                                 "arguments": {"order_id": f"ord_000{rng.randint(1, 3)}"}}),
                 ("tools/call", {"name": _text(rng), "arguments": _value(rng)}),
                 ("tools/call", _value(rng)), ("ping", None), ("tools/list", None),
                 ("prompts/list", None), ("prompts/get", {"name": "task"}),
                 ("resources/list", None), (_text(rng), _value(rng))]
        method, params = rng.choice(calls)
        return {"jsonrpc": "2.0", "id": self.ident(), "method": method,
                **({"params": params} if params is not None else {})}

    def frame(self) -> bytes:
        rng, kind = self.rng, self.rng.randrange(14)
        if kind < 5:
            return json.dumps(self.request(), ensure_ascii=rng.random() < 0.5).encode()
        if kind == 5:  # nested deep (far from Python's own limit, either way), id first
            depth = rng.choice([50, 150, 5_000, 100_000])
            self.n += 1
            return (f'{{"jsonrpc": "2.0", "id": {self.n}, "method": "ping", "params": {{"x": '
                    + "[" * depth + "]" * depth + "}}").encode()
        if kind == 6:  # long
            request = self.request()
            request["params"] = {"pad": "y" * rng.randint(10_000, 1_000_000)}
            return json.dumps(request).encode()
        if kind == 7:
            return json.dumps([self.request() for _ in range(rng.randint(0, 3))]).encode()
        if kind == 8:
            return json.dumps(self.request()).encode("utf-16-le")
        if kind == 9:  # a lone surrogate, or bytes that are no UTF-8
            raw = json.dumps(self.request()).encode()
            return raw.replace(b'"2.0"', rng.choice([b'"2.0\\udc80"', b'"2.0\xff\xc3"']))
        if kind == 10:  # an id of the wrong type, or a notification, or an answer to nothing
            return json.dumps(rng.choice([
                {"jsonrpc": "2.0", "id": rng.choice([None, True, 1.5, [1], {"a": 1}]),
                 "method": "ping"},
                {"jsonrpc": "2.0", "method": rng.choice(["notifications/cancelled",
                                                         "notifications/x"]),
                 "params": {"requestId": rng.randint(0, 200)}},
                {"jsonrpc": "2.0", "id": rng.randint(0, 10**6), "result": _value(rng)}])).encode()
        if kind == 11:
            raw = json.dumps(self.request()).encode()
            return raw[:rng.randrange(len(raw))]  # cut short
        return json.dumps(_value(rng)).encode()


def _expected(frame: bytes) -> list[Any]:
    """The ids Python's json reads as requests in the line ``frame`` makes (each must be
    answered once)."""
    try:
        message = json.loads(frame + b"\n")
    except (ValueError, RecursionError):
        return []
    found = message if isinstance(message, list) else [message]
    return [m["id"] for m in found if isinstance(m, dict) and "method" in m
            and (isinstance(m.get("id"), str) or (isinstance(m.get("id"), int)
                                                  and not isinstance(m.get("id"), bool)))]


class Proxy:
    """``limbo proxy`` over stdio, its answers read on a thread."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([LIMBO, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: dict[str, int] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def send(self, frame: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame + b"\n")
        self.proc.stdin.flush()

    def wait(self, ids: list[Any]) -> None:
        """Until every one of ``ids`` is answered (each id: at most once, ever)."""
        deadline = time.monotonic() + SCALED_TIMEOUT_S + SLACK_S
        waiting = {json.dumps(i) for i in ids}
        while waiting:
            try:
                answer = self.answers.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to {waiting}") from None
            key = json.dumps(answer.get("id"))
            if answer.get("id") is not None:
                self.seen[key] = self.seen.get(key, 0) + 1
                assert self.seen[key] == 1, f"{key} answered twice"
            waiting.discard(key)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "fuzz", "version": "0"}}}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_agent_side_fuzzed(tmp_path: Path, seed: int) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    proxy = Proxy(proxy_args(db, out, "none", "orders_place"))
    proxy.send(json.dumps(INIT).encode())
    proxy.wait([1])
    frames = Frames(seed)
    for _ in range(120):
        frame = frames.frame()
        proxy.send(frame)
        proxy.wait(_expected(frame))
    proxy.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "finish", "arguments": {"status": "completed", "summary": "fuzzed"}}}).encode())
    proxy.wait([2])
    _, err = proxy.proc.communicate(timeout=120)
    assert proxy.proc.returncode == 0 and b"Traceback" not in err, err.decode()[-3000:]
    _settled(out, db)


def _settled(out: Path, db: Path) -> None:
    """The record's ledger equals the database; every line of the journal is JSON."""
    record = wait_for_record(out)
    journal = next((out / "proxy").iterdir()).read_bytes().split(b"\n")[:-1]
    entries = [json.loads(line) for line in journal]
    assert entries[-1]["type"] == "recorded"
    assert ledger(record) == database(db, before_ids(entries))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_upstream_side_fuzzed(tmp_path: Path, seed: int) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    args = ["proxy", "--upstream-cmd", f"{sys.executable} {WILD} {db} {seed}", "--world",
            str(WORLD), "--template", "orders_place", "--time-scale", "0.01", "--out", str(out)]
    waited: list[float] = []

    async def agent() -> None:
        params = StdioServerParameters(command=LIMBO, args=args, env=dict(os.environ))
        async with Client(params, cache=None) as client:
            for i in range(24):
                began = time.monotonic()
                await client.call_tool("create_order", {"customer_id": f"cus_{i % 3}",
                                                        "sku": f"SKU-{i}", "quantity": 1 + i % 2},
                                       read_timeout_seconds=SCALED_TIMEOUT_S + SLACK_S)
                waited.append(time.monotonic() - began)
                if i % 6 == 5:
                    listed = await client.call_tool("list_orders", {})
                    assert not listed.is_error
            await client.call_tool("finish", {"status": "completed", "summary": "x"})

    asyncio.run(agent())
    assert max(waited) < SCALED_TIMEOUT_S + SLACK_S
    assert rows(db, "orders")  # something committed
    _settled(out, db)
