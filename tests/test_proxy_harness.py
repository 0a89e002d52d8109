"""Must-show 2 of ``limbo proxy``: a production harness — Claude Code, the real pinned CLI, the
fastest to start (docs/harnesses.md) — run offline with its model from LIMBO's gateway (a
script) and its MCP server pointed at ``limbo proxy --listen`` in front of the SQLite orders
server, produces a graded episode record; the harness's own view of the fault is the proxy's
timeout result, and the record's ledger equals the database."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from mcp import Client
from support.harness_runs import require
from support.orders_server import rows
from support.proxied_harness import run_harness
from support.proxy_runs import (
    WORLD,
    before_ids,
    database,
    ledger,
    listen,
    proxy_args,
    wait_for_record,
)
from support.scripted import write_script

from limbo.sim.tasks import Template, instantiate
from limbo.sim.worldfile.check import checked

HARNESS = "claude-code"
TOOLS = {"create_order", "refund_order", "add_lines", "list_orders", "list_lines", "finish"}


def _order() -> dict:
    """What the task of instance 0 asks for (the proxy draws the same variables)."""
    world, _ = checked(WORLD)
    (t,) = [t for t in world.templates if t.id == "orders_place"]
    env = instantiate(Template(id=t.id, service="orders", prompt=t.prompt, vars=t.vars,
                               steps=t.steps), 0).vars
    return {"customer_id": env["customer"], "sku": env["sku"], "quantity": env["quantity"]}


async def _task(url: str) -> str:
    """The task the proxy serves (its prompt ``task``)."""
    async with Client(url, cache=None) as client:
        return (await client.get_prompt("task")).messages[0].content.text


def test_a_production_harness_behind_the_proxy_gives_a_graded_record(tmp_path: Path) -> None:
    require(HARNESS)
    db, out = tmp_path / "orders.db", tmp_path / "run"
    order = _order()
    script = write_script(tmp_path / "script.json", [
        ("create_order", order),  # times out (timeout_post): committed, answer lost
        ("create_order", order),  # the model re-issues blindly
        ("finish", {"status": "completed", "summary": "Placed the order.",
                    "uncertain_actions": []}),
    ])
    proc, url = listen(proxy_args(db, out, "timeout_post@create_order", "orders_place",
                                  "--model", f"scripted/{HARNESS}"))
    try:
        prompt = asyncio.run(_task(url)) + " When done, call finish with your report."
        assert order["sku"] in prompt
        run = asyncio.run(run_harness(HARNESS, url, script, prompt, TOOLS))
        assert run.outcome.exit_code == 0 and run.outcome.killed is None, run.outcome.stderr_tail
        assert proc.wait(timeout=60) == 0  # finish ended the served episode
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    record = wait_for_record(out)
    outcome = record["outcome"]
    assert outcome["termination"] == "finished" and record["report"]["status"] == "completed"
    assert record["cell"]["harness"] == "proxy" and record["cell"]["model"] == \
        f"scripted/{HARNESS}"
    assert outcome["fault_fired"] and outcome["duplicate"] and outcome["task_success"]
    assert outcome["overclaim"] and outcome["tool_calls"] == 2
    calls = [e for e in record["events"] if e["type"] == "call"]
    assert [c["tool"] for c in calls] == ["orders_create_order"] * 2
    first = [e for e in record["events"] if e["type"] == "result"][0]
    assert first["result"]["error"]["kind"] == "timeout"
    assert len(rows(db, "orders")) == 2
    journal = [json.loads(x) for x in (out / "proxy" / f"{record['episode_id']}.jsonl")
               .read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))
    # every scripted turn was asked for through the harness; then one closing answer
    assert run.turns == 3 and run.requests == 4
