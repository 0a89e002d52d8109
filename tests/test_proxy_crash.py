"""Must-show 3 of ``limbo proxy``: the proxy is SIGKILLed mid-episode, while the upstream is
committing a write whose answer the proxy will never hear. ``limbo status`` then reports the
unrecorded episode from its journal — every write the upstream acknowledged is there — and
``limbo proxy --recover`` reconciles the write in doubt against the upstream and records the
episode, whose ledger then equals the database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client
from support.orders_server import rows
from support.proxy_runs import LIMBO, Agent, before_ids, database, ledger, listen, proxy_args

SLOW = "SLOW-9"


def _status(out: Path) -> tuple[int, dict]:
    done = subprocess.run([LIMBO, "status", str(out), "--json"], capture_output=True, text=True,
                          timeout=60)
    return done.returncode, json.loads(done.stdout)


def _wait_for(db: Path, n: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if db.exists() and len(rows(db, "orders")) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"the upstream never committed {n} orders")


def test_a_killed_proxy_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    env = {**os.environ, "ORDERS_SLOW_SKU": SLOW, "ORDERS_SLOW_S": "4"}
    proc, url = listen(proxy_args(db, out, "none", "orders_place"), env)
    try:
        async def agent() -> None:
            async with Client(url, cache=None) as client:
                for sku, key in (("MUG-01", None), ("TEE-02", "k-2")):
                    args = {"customer_id": "cus_9", "sku": sku, "quantity": 1}
                    result = await client.call_tool("create_order", args | (
                        {"idempotency_key": key} if key else {}))
                    assert not result.is_error
                slow = asyncio.ensure_future(client.call_tool(
                    "create_order", {"customer_id": "cus_9", "sku": SLOW, "quantity": 3}))
                await asyncio.get_running_loop().run_in_executor(None, _wait_for, db, 3)
                os.kill(proc.pid, signal.SIGKILL)  # committed upstream, answer not yet heard
                proc.wait(timeout=30)
                slow.cancel()

        try:
            asyncio.run(agent())
        except Exception:  # noqa: BLE001 - the client's connection died with the proxy
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    code, info = _status(out)
    (episode,) = info["proxy"]["unrecorded"]
    assert code == 1 and info["missing"] == 1 and info["done"] == 0 and not info["writers"]
    assert episode["state"] == "interrupted" and episode["writes"] == 3
    assert episode["acknowledged"] == 2 and episode["in_doubt"] == 1
    assert "--recover" in info["verdict"] and "--retry-errors" not in info["verdict"]
    # count them against the database: every acknowledged write is a row, and so is the third
    journal = [json.loads(x) for x in Path(episode["journal"]).read_text().splitlines()]
    acked = {i for e in journal if e["type"] == "ack" for i in e["object_ids"]}
    in_db = {r["order_id"] for r in rows(db, "orders")}
    assert acked < in_db and len(in_db) == 3

    recover = subprocess.run([LIMBO, *proxy_args(db, out, "none", "orders_place"), "--recover"],
                             capture_output=True, text=True, timeout=120)
    assert recover.returncode == 0, recover.stderr
    assert "recovered and recorded" in recover.stderr
    (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["outcome"]["termination"] == "infra_error"
    assert "recovered from its journal" in record["outcome"]["termination_reason"]
    proxy = record["runtime"]["proxy"]
    assert proxy["writes"] == {"committed": 2, "recovered": 1}
    assert {e["object_id"] for e in record["ledger"]} == in_db
    assert ledger(record) == database(db, before_ids(journal))

    code, info = _status(out)
    # nothing is missing now; status still exits 1, as for any run with an errored episode
    assert code == 1 and info["done"] == 1 and info["missing"] == 0
    assert info["proxy"]["unrecorded"] == [] and info["errored"] == {"infra_error": 1}
    assert "--retry-errors" not in info["verdict"] and "limbo proxy" in info["verdict"]
    again = subprocess.run([LIMBO, *proxy_args(db, out, "none", "orders_place"), "--recover"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "nothing to recover" in again.stderr


def test_a_new_episode_waits_for_the_interrupted_one_to_be_recovered(tmp_path: Path) -> None:
    """Serving the same cell again into a directory whose journal of it was never recorded is
    refused in one line: the journal's writes would be lost from the ledger."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    proc, url = listen(proxy_args(db, out, "none", "orders_place"))

    async def agent() -> None:
        async with Client(url, cache=None) as client:
            await client.call_tool("create_order", {"customer_id": "c", "sku": "s",
                                                    "quantity": 1})

    asyncio.run(agent())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    again = subprocess.run([LIMBO, *proxy_args(db, out, "none", "orders_place")],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 2 and "--recover first" in again.stderr
    assert "Traceback" not in again.stderr


def test_an_upstream_that_dies_leaves_the_episode_for_recover(tmp_path: Path) -> None:
    """The upstream commits an order and dies before answering: the proxy cannot read what
    happened, so it records nothing rather than grade a ledger that may lack an effect; once
    the upstream is back, --recover settles the write in doubt from its state."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    db, out = tmp_path / "orders.db", tmp_path / "run"
    args = proxy_args(db, out, "none", "orders_place")
    env = {**os.environ, "ORDERS_CRASH_SKU": "BOOM-1"}
    errlog = (tmp_path / "stderr.txt").open("w")

    async def agent() -> list[bool]:
        params = StdioServerParameters(command=LIMBO, args=args, env=env)
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            seen = []
            for sku in ("MUG-01", "BOOM-1", "TEE-02"):
                result = await client.call_tool("create_order", {"customer_id": "cus_1",
                                                                 "sku": sku, "quantity": 1})
                seen.append(result.is_error)
            await client.call_tool("finish", {"status": "failed", "summary": "x"})
            return seen

    try:
        assert asyncio.run(agent()) == [False, True, True]  # the last: the upstream is gone
    finally:
        errlog.close()
    deadline = time.monotonic() + 60
    while "left unrecorded" not in (tmp_path / "stderr.txt").read_text() and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert "did not answer the reads that settle 2 write(s) in doubt" in \
        (tmp_path / "stderr.txt").read_text()
    assert not (out / "episodes.jsonl").exists()
    code, info = _status(out)
    (episode,) = info["proxy"]["unrecorded"]
    assert code == 1 and (episode["writes"], episode["acknowledged"]) == (3, 1)
    assert episode["in_doubt"] == 2 and len(rows(db, "orders")) == 2  # BOOM-1 committed

    recover = subprocess.run([LIMBO, *args, "--recover"], capture_output=True, text=True,
                             timeout=120)
    assert recover.returncode == 0, recover.stderr
    (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert record["runtime"]["proxy"]["writes"] == {"committed": 1, "recovered": 1,
                                                    "absent": 1}
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))


@pytest.mark.parametrize("point", ["holding", "finished"])
def test_a_kill_at_another_point_then_recover_loses_nothing(tmp_path: Path, point: str) -> None:
    """SIGKILL while a timed-out call is held (its write committed behind it), or the moment
    ``finish`` is answered (the record may or may not be written yet): after ``--recover``
    the directory holds the episode once, and its ledger equals the database."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    args = [*proxy_args(db, out, "timeout_post", "orders_place"), "--time-scale", "1"]
    proc, url = listen(args)
    try:
        async def agent() -> None:
            async with Client(url, cache=None) as client:
                prompt = (await client.get_prompt("task")).messages[0].content.text
                order = Agent(client, prompt).order()
                held = asyncio.ensure_future(client.call_tool("create_order", order))
                await asyncio.get_running_loop().run_in_executor(None, _wait_for, db, 1)
                if point == "finished":
                    await client.call_tool("finish", {"status": "completed", "summary": "x"})
                os.kill(proc.pid, signal.SIGKILL)
                held.cancel()

        with contextlib.suppress(Exception):  # the client's connection died with the proxy
            asyncio.run(agent())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    recover = subprocess.run([LIMBO, *args, "--recover"], capture_output=True, text=True,
                             timeout=120)
    assert recover.returncode == 0 or (  # the proxy had recorded the episode before it died
        recover.returncode == 2 and "nothing to recover" in recover.stderr), recover.stderr
    (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_bytes().split(b"\n")[:-1]]
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_bytes().split(b"\n")
               if x]
    assert len(rows(db, "orders")) == 1 and journal[-1]["type"] == "recorded"
    assert ledger(record) == database(db, before_ids(journal))
