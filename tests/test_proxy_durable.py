"""Must-show 1 of issue 36, the durability part: nothing the upstream acknowledged is lost —
whatever the size of its answers and the transport, when it restarts mid-episode, when it is
slow to exit, when the client is impatient or cancels, and when the proxy dies between writing
the record and journaling that it did. Each test runs the SQLite orders server, counts its
rows, and checks that the ledger equals the database and that the grade follows the rows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.orders_server import rows
from support.proxy_runs import (
    LIMBO,
    SCALE,
    WORLD,
    Agent,
    HttpOrders,
    before_ids,
    database,
    ledger,
    proxy_args,
    run_stdio,
    wait_for_record,
)

PAD = 600 * 1024
"""More than the 512 KiB an event stream's line could hold before."""


def _agrees(record: dict[str, Any], db: Path, out: Path) -> None:
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))


def _http_args(url: str, out: Path, fault: str = "none", *extra: str) -> list[str]:
    return ["proxy", "--upstream-url", url, "--world", str(WORLD), "--template", "orders_place",
            "--fault", fault, "--time-scale", SCALE, "--out", str(out), *extra]


async def _place_and_list(agent: Agent) -> None:
    ok, body = await agent.call("create_order", agent.order())
    assert ok and len(body["receipt"]) == PAD, str(body)[:300]
    ok, body = await agent.call("list_orders", {})
    assert ok and len(body["orders"]) == 1
    await agent.finish()


@pytest.mark.parametrize("transport", ["sse", "json", "stdio"])
def test_an_answer_of_any_size_is_acknowledged(tmp_path: Path, transport: str) -> None:
    env = {"ORDERS_PAD_BYTES": str(PAD)}
    if transport == "stdio":
        run = run_stdio(tmp_path, "none", _place_and_list, env=env)
    else:
        with HttpOrders(tmp_path / "orders.db", env, sse=transport == "sse") as server:
            run = run_stdio(tmp_path, "none", _place_and_list,
                            args=_http_args(server.url, tmp_path / "run"))
    assert len(rows(run.db, "orders")) == 1 and run.record["outcome"]["exactly_once"]
    _agrees(run.record, run.db, run.out)


def test_an_upstream_restart_leaves_no_write_behind(tmp_path: Path) -> None:
    """The upstream commits an order and is killed before answering; it comes back on the same
    port, knowing nothing of the proxy's session. The proxy opens a new one: the next order is
    placed, and reconciliation finds the order whose answer was lost."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    server = HttpOrders(db, {"ORDERS_SLOW_SKU": "SLOW-1", "ORDERS_SLOW_S": "60"}).start()

    async def agent(client: Client) -> list[bool]:
        seen = []
        for sku in ("MUG-01", "SLOW-1", "TEE-02"):
            call = asyncio.ensure_future(client.call_tool("create_order", {
                "customer_id": "cus_1", "sku": sku, "quantity": 1}))
            if sku == "SLOW-1":  # committed, not yet answered: the upstream dies, comes back
                await asyncio.get_running_loop().run_in_executor(None, _until_rows, db, 2)
                server.kill()
                seen.append((await call).is_error)
                server.start()
                continue
            seen.append((await call).is_error)
        await client.call_tool("finish", {"status": "completed", "summary": "x"})
        return seen

    try:
        seen = _with_client(_http_args(server.url, out), agent)
    finally:
        server.kill()
    assert seen == [False, True, False]
    record = wait_for_record(out)
    assert len(rows(db, "orders")) == 3
    assert record["runtime"]["proxy"]["writes"] == {"committed": 2, "recovered": 1}
    assert record["outcome"]["termination"] == "finished"
    _agrees(record, db, out)


def _until_rows(db: Path, n: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if db.exists() and len(rows(db, "orders")) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the upstream never committed {n} orders")


def _with_client(args: list[str], body: Any, env: dict[str, str] | None = None) -> Any:
    """``body(client)`` with the SDK's stdio client, which starts ``limbo proxy args``."""
    params = StdioServerParameters(command=LIMBO, args=args, env={**os.environ, **(env or {})})

    async def go() -> Any:
        async with Client(stdio_client(params), cache=None) as client:
            return await body(client)

    return asyncio.run(go())


def test_the_record_does_not_wait_for_the_upstream_to_exit(tmp_path: Path) -> None:
    """An upstream that takes 6 s to exit (and ignores SIGTERM meanwhile): the SDK's client
    gives its server 2 s, then SIGTERM, then SIGKILL. The record is written when the agent
    finishes, before the upstream is asked to stop."""
    async def place(agent: Agent) -> None:
        await agent.call("create_order", agent.order())
        await agent.finish()

    run = run_stdio(tmp_path, "none", place, env={"ORDERS_EXIT_S": "6"})
    assert len(rows(run.db, "orders")) == 1 and run.record["outcome"]["exactly_once"]
    _agrees(run.record, run.db, run.out)


def test_a_held_call_is_answered_at_once_when_the_agent_finishes(tmp_path: Path) -> None:
    """A call held for the 30 s client timeout (``timeout_post`` at scale 1) is answered as
    soon as the agent finishes, not 30 s later."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    args = [*proxy_args(db, out, "timeout_post", "orders_place"), "--time-scale", "1"]

    async def agent(client: Client) -> tuple[bool, float]:
        prompt = (await client.get_prompt("task")).messages[0].content.text
        held = asyncio.ensure_future(client.call_tool("create_order", Agent(client,
                                                                            prompt).order()))
        await asyncio.get_running_loop().run_in_executor(None, _until_rows, db, 1)
        began = time.monotonic()
        await client.call_tool("finish", {"status": "completed", "summary": "x"})
        result = await held
        return bool(result.is_error), time.monotonic() - began

    timed_out, waited = _with_client(args, agent)
    assert timed_out and waited < 15  # not the 30 s hold
    record = wait_for_record(out)
    assert record["outcome"]["termination"] == "finished" and len(rows(db, "orders")) == 1
    _agrees(record, db, out)


def test_a_client_that_cancels_a_held_call_is_graded(tmp_path: Path) -> None:
    """The client's own read timeout (0.5 s) is shorter than the held one (6 s, at scale 0.2):
    it cancels the call (``notifications/cancelled``), re-sends it, finishes and exits — and
    gives the proxy 2 s before SIGTERM. The episode is recorded as finished and graded: two
    rows, a duplicate."""
    db, out = tmp_path / "orders.db", tmp_path / "run"

    async def agent(client: Client) -> None:
        prompt = (await client.get_prompt("task")).messages[0].content.text
        order = Agent(client, prompt).order()
        try:
            await client.call_tool("create_order", order, read_timeout_seconds=0.5)
        except Exception:  # noqa: BLE001 - the SDK's own timeout, whatever it raises
            pass
        assert not (await client.call_tool("create_order", order)).is_error
        await client.call_tool("finish", {"status": "completed", "summary": "x"})

    _with_client([*proxy_args(db, out, "timeout_post", "orders_place"), "--time-scale", "0.2"],
                 agent)
    record = wait_for_record(out, 30)
    assert record["outcome"]["termination"] == "finished", record["outcome"]
    assert len(rows(db, "orders")) == 2 and record["outcome"]["duplicate"]
    _agrees(record, db, out)


def test_recover_after_a_crash_between_the_record_and_its_mark_adds_no_record(
        tmp_path: Path) -> None:
    """The proxy died after appending the record and before journaling ``recorded`` (the
    journal's last line is cut off, as the crash leaves it): ``--recover`` finds the record and
    marks the journal, and appends no second record."""
    async def place(agent: Agent) -> None:
        await agent.call("create_order", agent.order())
        await agent.finish()

    run = run_stdio(tmp_path, "none", place)
    path = next((run.out / "proxy").iterdir())
    lines = path.read_text().splitlines(keepends=True)
    assert json.loads(lines[-1])["type"] == "recorded"
    path.write_text("".join(lines[:-1]))
    args = [*proxy_args(run.db, run.out, "none", "orders_place"), "--recover"]
    for _ in range(2):
        done = subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 2), done.stderr
        assert len((run.out / "episodes.jsonl").read_text().splitlines()) == 1
    assert json.loads(path.read_text().splitlines()[-1])["type"] == "recorded"
    status = subprocess.run([LIMBO, "status", str(run.out), "--json"], capture_output=True,
                            text=True, timeout=60)
    assert json.loads(status.stdout)["proxy"]["unrecorded"] == []
    assert len(rows(run.db, "orders")) == 1
    _agrees(run.record, run.db, run.out)
