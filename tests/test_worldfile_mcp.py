"""A world's episode served by `limbo mcp --world` to the mcp SDK's own client over stdio:
the client sees the world's tools only (with their declared contract), the fault acts on the
world's write, the declared refund answers its repeat with a 409, and the graded record lands
in --out with the world's identity in its id."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from limbo.experiments.grid import world_seed
from limbo.sim.cell import Cell
from limbo.sim.worldfile.kit import load_world

LIMBO = str(Path(sys.executable).parent / "limbo")
SHOP = Path(__file__).resolve().parents[1] / "examples" / "worlds" / "shop.toml"
CELL = ["--world", str(SHOP), "--template", "shop_refund_email", "--fault", "http500_post"]
REPORT = {"status": "completed", "summary": "Refunded once, e-mailed.", "uncertain_actions": []}


def _text(result) -> dict:
    return json.loads(result.content[0].text)


async def _drive(client: Client) -> list[dict]:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"shop_create_order", "shop_refund_order", "shop_set_status",
                          "shop_add_lines", "shop_list_orders", "shop_list_lines",
                          "shop_search_orders", "notify_send_email", "notify_send_sms",
                          "notify_search_sent", "wait", "finish"}
    assert "idempotency_key" in json.dumps(tools["shop_create_order"].input_schema)
    assert "idempotency_key" not in json.dumps(tools["shop_refund_order"].input_schema)
    assert "up to 120 s after it commits" in tools["notify_search_sent"].description
    prompt = (await client.get_prompt("task")).messages[0].content.text
    order = re.search(r"order (ord_[0-9a-f]+) of customer (cus_\d+)", prompt)
    assert order, prompt
    first = await client.call_tool("shop_refund_order", {"order_id": order.group(1)})
    again = await client.call_tool("shop_refund_order", {"order_id": order.group(1)})
    mail = await client.call_tool("notify_send_email", {
        "to": f"{order.group(2)}@example.com", "subject": f"Refund for {order.group(1)}",
        "body": "Your refund is on its way."})
    done = await client.call_tool("finish", REPORT)
    return [_text(first), _text(again), _text(mail), _text(done)]


def test_limbo_mcp_serves_a_world_cell(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    params = StdioServerParameters(command=LIMBO, args=["mcp", *CELL, "--out", str(out)])

    async def go() -> list[dict]:
        async with Client(params) as client:
            return await _drive(client)

    first, again, mail, done = asyncio.run(go())
    assert first["error"]["kind"] == "server_error"  # http500_post: the refund committed
    assert again["error"]["kind"] == "conflict" and again["error"]["current"] == {
        "status": "refunded"}
    assert mail["ok"] and done == {"ok": True, "finished": True}
    for _ in range(100):  # the server writes the record once the client has gone
        if (out / "episodes.jsonl").exists():
            break
        asyncio.run(asyncio.sleep(0.1))
    (record,) = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    outcome = record["outcome"]
    assert outcome["exactly_once"] and not outcome["duplicate"] and outcome["fault_fired"]
    assert [e["tool"] for e in record["ledger"]] == ["shop_refund_order", "notify_send_email"]
    task = {"template": "shop_refund_email", "focal_write": "shop_refund_order", "instance": 0}
    cell = Cell(model="external/mcp-client", harness="mcp", fault="http500_post",
                service="shop", **task, seed=world_seed(0, task),
                world=load_world(SHOP).identity)
    assert record["episode_id"] == cell.episode_id
