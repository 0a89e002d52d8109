"""Must-show 3: ``limbo mcp`` is a standalone MCP server that the ``mcp`` SDK's own client drives
over stdio and over streamable HTTP (both protocol eras): list the tools, call them, see a
fault, see the guard's receipt, finish, and find the graded record in ``--out``."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

LIMBO = str(Path(sys.executable).parent / "limbo")
CELL = ["--template", "charge_invoice", "--fault", "http500_post", "--condition", "guard"]
CHARGE = {"customer_id": "cus_122", "amount_cents": 37900, "currency": "eur",
          "description": "INV-0031"}
REPORT = {"status": "completed", "summary": "Charged INV-0031 once.", "uncertain_actions": []}


def _text(result) -> dict:
    return json.loads(result.content[0].text)


async def _drive(client: Client) -> list[dict]:
    """An agent that charges, sees the 500, retries blindly (the guard keys the retry), posts
    the comment with the charge id, and finishes."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"billing_create_charge", "billing_list_charges", "finish", "wait"} <= set(tools)
    assert "idempotency_key" in json.dumps(tools["billing_create_charge"].input_schema)
    assert "Not idempotent" in tools["tickets_add_comment"].description
    first = await client.call_tool("billing_create_charge", CHARGE)
    assert first.is_error and _text(first)["error"]["kind"] == "server_error"
    retry = await client.call_tool("billing_create_charge", CHARGE)
    assert not retry.is_error
    charge = _text(retry)
    ticket = re.search(r"T_[0-9a-f]+", (await client.get_prompt("task")).messages[0].content.text)
    comment = await client.call_tool("tickets_add_comment", {
        "ticket_id": ticket.group(0), "body": f"Charged INV-0031: {charge['charge']['charge_id']}"})
    done = await client.call_tool("finish", REPORT)
    return [_text(first), charge, _text(comment), _text(done)]


def _check(out: Path, seen: list[dict]) -> None:
    first, charge, comment, done = seen
    assert first["guard"]["outcome"] == "ambiguous" and first["guard"]["replayed"] is False
    # the retry carried the guard's key, so the service answered it from the first commit
    assert charge["guard"]["key"] == first["guard"]["key"] and charge["idempotent_replayed"]
    assert comment["ok"] and done == {"ok": True, "finished": True}
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 1
    record = records[0]
    assert record["cell"]["harness"] == "mcp" and record["cell"]["fault"] == "http500_post"
    outcome = record["outcome"]
    assert outcome["exactly_once"] and outcome["task_success"] and not outcome["duplicate"]
    assert outcome["termination"] == "finished" and record["report"] == REPORT
    assert outcome["tool_calls"] == 3 and outcome["model_turns"] == 0
    assert [e["type"] for e in record["events"]].count("guard") >= 4
    assert (out / "manifest.json").exists()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_limbo_mcp_over_stdio(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "runs"
    params = StdioServerParameters(command=LIMBO, args=["mcp", *CELL, "--out", str(out)])

    async def go() -> list[dict]:
        async with Client(params, mode=mode) as client:
            return await _drive(client)

    seen = asyncio.run(go())
    for _ in range(100):  # the server writes the record once the client has gone
        if (out / "episodes.jsonl").exists():
            break
        asyncio.run(asyncio.sleep(0.1))
    _check(out, seen)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_limbo_mcp_over_streamable_http(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "runs"
    proc = subprocess.Popen([LIMBO, "mcp", "--transport", "http", *CELL, "--out", str(out)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
        assert url, line

        async def go() -> list[dict]:
            async with Client(url.group(0), mode=mode) as client:
                return await _drive(client)

        seen = asyncio.run(go())
        assert proc.wait(timeout=30) == 0  # finish ends the served episode
        assert "recorded in" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    _check(out, seen)


@pytest.mark.parametrize(("args", "needle"), [
    (["--fault", "nosuch"], "unknown fault 'nosuch'"),
    (["--condition", "nosuch"], "unknown condition 'nosuch'"),
    (["--template", "charge_invoice", "--focal-write", "mail_send"], "is not a write of"),
    (["--fault", "partial_batch"], "batch writes only"),
    (["--time-scale", "-1"], "--time-scale must be a number from 0 to 100"),
    (["--time-scale", "nan"], "--time-scale must be a number from 0 to 100"),
    (["--hold-timeouts", "3001"], "--time-scale must be a number from 0 to 100"),
])
def test_bad_cells_are_one_line_errors(tmp_path: Path, args: list[str], needle: str) -> None:
    result = subprocess.run([LIMBO, "mcp", *args, "--out", str(tmp_path / "o")],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "o").exists()


def test_a_client_that_leaves_without_finishing_still_gets_a_record(tmp_path: Path) -> None:
    """Over HTTP a stateless client may simply go away; stopping the server (SIGTERM) ends the
    episode, which is graded as one whose agent never reported."""
    import signal

    out = tmp_path / "runs"
    proc = subprocess.Popen([LIMBO, "mcp", "--transport", "http", "--out", str(out)],
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+/mcp", proc.stderr.readline()).group(0)

        async def go() -> None:
            async with Client(url) as client:
                await client.call_tool("billing_create_charge", CHARGE)

        asyncio.run(go())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    record = json.loads((out / "episodes.jsonl").read_text())
    outcome = record["outcome"]
    assert outcome["report_status"] == "none" and outcome["commits"]["charge"] == 1
    assert outcome["missing"] and not outcome["task_success"]
