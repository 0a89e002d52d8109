"""Running ``limbo proxy`` for the tests: the real command, in front of the real orders server
(:mod:`support.orders_server`, over SQLite), driven by the ``mcp`` SDK's own client — and
comparing what the proxy's ledger says with what the database holds."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support.orders_server import rows

ROOT = Path(__file__).resolve().parents[2]
LIMBO = str(Path(sys.executable).parent / "limbo")
WORLD = ROOT / "tests" / "fixtures" / "proxy" / "orders.toml"
SERVER = ROOT / "tests" / "support" / "orders_server.py"
SCALE = "0.01"
"""Fault durations at a hundredth of the sandbox's: a 0.3 s timeout, a late commit 0.9 s after."""


def upstream_cmd(db: Path) -> str:
    return f"{sys.executable} {SERVER} {db}"


def proxy_args(db: Path, out: Path, fault: str, task: str, *extra: str) -> list[str]:
    return ["proxy", "--upstream-cmd", upstream_cmd(db), "--world", str(WORLD), "--template", task,
            "--fault", fault, "--time-scale", SCALE, "--out", str(out), *extra]


@dataclass
class Agent:
    """What a scripted client sees of the task, and every answer it got (parsed)."""

    client: Client
    prompt: str
    answers: list[tuple[str, bool, Any]] = field(default_factory=list)

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """``(ok, parsed answer)`` of one call."""
        result = await self.client.call_tool(tool, args)
        text = result.content[0].text if result.content else ""
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        self.answers.append((tool, not result.is_error, body))
        return not result.is_error, body

    async def finish(self, status: str = "completed", uncertain: list[str] | None = None) -> None:
        ok, _ = await self.call("finish", {"status": status, "summary": "done",
                                           "uncertain_actions": uncertain or []})
        assert ok

    def order(self) -> dict[str, Any]:
        """The order ``orders_place`` asks for."""
        m = re.search(r"customer (\S+): (\d+) x (\S+)\.", self.prompt)
        assert m, self.prompt
        return {"customer_id": m.group(1), "sku": m.group(3), "quantity": int(m.group(2))}

    def named(self, what: str) -> str:
        """An id the task's prompt names (``order ord_0001``)."""
        m = re.search(rf"{what} (\S+?)[ .:]", self.prompt)
        assert m, self.prompt
        return m.group(1)


Script = Callable[[Agent], Awaitable[None]]


@dataclass
class Run:
    record: dict[str, Any]
    agent: Agent
    db: Path
    out: Path
    stderr: str = ""

    @property
    def journal(self) -> list[dict[str, Any]]:
        path = self.out / "proxy" / f"{self.record['episode_id']}.jsonl"
        return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


KEY = "idempotency_key"
"""The orders server's key argument (the world file declares it)."""


async def keyed(agent: Agent) -> None:
    """Places the order with a key; on a failure, re-issues it with the same key."""
    args = {**agent.order(), KEY: "order-once-1"}
    ok, _ = await agent.call("create_order", args)
    if not ok:
        await agent.call("create_order", args)
    await agent.finish()


def run_stdio(tmp: Path, fault: str, script: Script, task: str = "orders_place",
              *extra: str, env: dict[str, str] | None = None,
              args: list[str] | None = None) -> Run:
    """One episode: the proxy started by the client over stdio, ``script`` driving it (``env``:
    the upstream's knobs, :mod:`support.orders_server`; ``args``: the proxy's whole command
    line instead of the stdio orders server's)."""
    db, out = tmp / "orders.db", tmp / "run"
    params = StdioServerParameters(command=LIMBO, env={**os.environ, **(env or {})},
                                   args=args or proxy_args(db, out, fault, task, *extra))
    errlog = (tmp / "stderr.txt").open("w")

    async def go() -> Agent:
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            prompt = (await client.get_prompt("task")).messages[0].content.text
            agent = Agent(client, prompt)
            await script(agent)
            return agent

    try:
        agent = asyncio.run(go())
    finally:
        errlog.close()
    record = wait_for_record(out)
    return Run(record, agent, db, out, (tmp / "stderr.txt").read_text())


def wait_for_record(out: Path, timeout_s: float = 60.0) -> dict[str, Any]:
    """The one record of ``out`` once the proxy has written it (after its client left)."""
    path = out / "episodes.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().endswith(b"\n"):
            (line,) = path.read_bytes().split(b"\n")[:-1]  # not splitlines: U+2028 is no end
            return json.loads(line)
        time.sleep(0.05)
    raise AssertionError(f"no record in {out} after {timeout_s} s")


def listen(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """``limbo proxy ... --listen 0`` started; its process and its MCP URL."""
    proc = subprocess.Popen([LIMBO, *args, "--listen", "0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    for line in proc.stderr:  # type: ignore[union-attr]
        lines.append(line)
        found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
        if found:
            return proc, found.group(0)
    proc.wait()
    raise AssertionError("the proxy did not start: " + "".join(lines))


# -- the ledger against the database ------------------------------------------------------------


def before_ids(journal: list[dict[str, Any]]) -> set[str]:
    """The orders that existed before the agent's first call (the task's setup made them)."""
    (baseline,) = [e for e in journal if e["type"] == "baseline"]
    reads = baseline.get("reads") or [{"tool": k, "items": v} for k, v in
                                      baseline.get("items", {}).items()]
    return {o["order_id"] for r in reads if r["tool"] == "orders_list_orders"
            for o in r["items"]}


def task_order(instance: int = 0) -> dict[str, Any]:
    """The order the task ``orders_place`` of ``instance`` asks for (the proxy draws the same
    variables), known before any proxy starts."""
    from limbo.sim.tasks import Template, instantiate
    from limbo.sim.worldfile.check import checked

    world, _ = checked(WORLD)
    (t,) = [t for t in world.templates if t.id == "orders_place"]
    env = instantiate(Template(id=t.id, service="orders", prompt=t.prompt, vars=t.vars,
                               steps=t.steps), instance).vars
    return {"customer_id": env["customer"], "sku": env["sku"], "quantity": env["quantity"]}


class HttpOrders:
    """The orders server over streamable HTTP on a free loopback port, which a test may kill
    and start again on the same port and database (an upstream restart)."""

    def __init__(self, db: Path, env: dict[str, str] | None = None, sse: bool = False) -> None:
        self.db, self.env, self.sse = db, {**os.environ, **(env or {})}, sse
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpOrders:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.db), "--http", str(self.port),
             *(["--sse"] if self.sse else [])], env=self.env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise AssertionError("the orders server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def __enter__(self) -> HttpOrders:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def database(db: Path, existing: set[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The effects the database holds: orders created during the episode, orders refunded,
    lines added."""
    orders = rows(db, "orders")
    return {
        "orders_create_order": sorted((o["order_id"], o["customer_id"], o["sku"], o["quantity"])
                                      for o in orders if o["order_id"] not in existing),
        "orders_refund_order": sorted((o["order_id"],) for o in orders
                                      if o["status"] == "refunded"),
        "orders_add_lines": sorted((r["order_id"], r["sku"], r["note"])
                                   for r in rows(db, "lines")),
    }


def ledger(record: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The same effects, as the record's ledger has them."""
    out: dict[str, list[tuple[Any, ...]]] = {"orders_create_order": [],
                                             "orders_refund_order": [], "orders_add_lines": []}
    for e in record["ledger"]:
        a = e["args"]
        if e["tool"] == "orders_create_order":
            out[e["tool"]].append((e["object_id"], a["customer_id"], a["sku"], a["quantity"]))
        elif e["tool"] == "orders_refund_order":
            out[e["tool"]].append((e["object_id"],))
        else:
            out[e["tool"]].append((a["order_id"], a["line"]["sku"], a["line"].get("note")))
    return {k: sorted(v) for k, v in out.items()}
