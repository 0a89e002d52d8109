"""Must-show 1 of issue 36, hostile input: what an agent or an upstream may send that a
well-behaved one never does gets a protocol error, and the proxy keeps serving — every call
answered within the time the ``--time-scale`` gives it; secrets in the upstream's URL and
headers written nowhere, in any encoding. Against the SQLite orders server, rows counted."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

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

from limbo.base.secrets import variants

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "0"}}


def _order(sku: str) -> dict[str, Any]:
    return {"name": "create_order", "arguments": {"customer_id": "cus_1", "sku": sku,
                                                  "quantity": 1}}


def _line(ident: Any, method: str, params: Any = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                       **({"params": params} if params is not None else {})}).encode() + b"\n"


def test_hostile_lines_get_protocol_errors_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    declared = _order("DECL-1")
    declared["name"] = "orders_create_order"  # the declared name, not the upstream's
    lines = [
        _line(1, "tools/call", _order("EARLY-1")),  # before initialize: never forwarded
        _line(2, "initialize", INIT),
        b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n',
        b"[" * 100_000 + b"]" * 100_000 + b"\n",  # too deep to be a message
        _line(3, "tools/call", _order("SUR-1")).replace(b"SUR-1", b"SUR-\\ud800"),
        b'\xef\xbb\xbf' + _line(4, "ping"),  # a BOM before the message: read past
        b"[" + _line(5, "ping").strip() + b", " + _line(6, "tools/list").strip() + b"]\n",
        b'{"jsonrpc": "2.0", "id": 999, "result": {}}\n',  # an answer to nothing
        b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}\n',
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": []}\n',
        _line(8, "tools/call", declared),
        _line(9, "tools/call", _order("BARE-1")),
        _line(10, "tools/call", {"name": "finish", "arguments": {"status": "completed",
                                                                 "summary": "x"}}),
        _line(11, "ping"),
    ]
    proc = subprocess.Popen([LIMBO, *proxy_args(db, out, "none", "orders_place")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    got, err = proc.communicate(b"".join(lines), timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()[-2000:]
    answers = [json.loads(x) for x in got.splitlines()]
    by_id = {a["id"]: a for a in answers if isinstance(a.get("id"), int)}
    assert by_id[1]["error"]["code"] == -32600  # not initialized
    assert by_id[2]["result"]["serverInfo"] == {"name": "orders", "version": "3.1.4"}
    assert by_id[3]["error"]["code"] == -32700 and by_id[4]["result"] == {}
    assert by_id[5]["error"]["code"] == by_id[6]["error"]["code"] == -32600  # a batch
    assert by_id[7]["error"]["code"] == -32602
    assert not by_id[8]["result"]["isError"] and not by_id[9]["result"]["isError"]
    assert by_id[11]["result"] == {} and 999 not in by_id
    nulls = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert sorted(nulls) == [-32700, -32600]  # the deep line, the id that is an object
    assert [r["sku"] for r in rows(db, "orders")] == ["DECL-1", "BARE-1"]
    record = wait_for_record(out)
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))
    assert [e["tool"] for e in record["ledger"]] == ["orders_create_order"] * 2


def test_a_hung_upstream_holds_a_call_no_longer_than_the_scaled_timeout(tmp_path: Path) -> None:
    """The upstream commits and never answers. At ``--time-scale 0.01`` the proxy gives up on
    it after 1.2 s (120 s × 0.01), not 120 s; reconciliation then finds the order."""
    waited: list[float] = []

    async def place(agent: Agent) -> None:
        began = time.monotonic()
        ok, body = await agent.call("create_order", {**agent.order(), "sku": "HANG-1"})
        waited.append(time.monotonic() - began)
        assert not ok and body["error"]["kind"] == "timeout"
        await agent.finish("failed", ["create_order"])

    run = run_stdio(tmp_path, "none", place,
                    env={"ORDERS_SLOW_SKU": "HANG-1", "ORDERS_SLOW_S": "3600"})
    assert 1.1 < waited[0] < 15, waited  # 1.2 s (120 s scaled), with room for a loaded machine
    assert len(rows(run.db, "orders")) == 1
    assert run.record["runtime"]["proxy"]["writes"] == {"recovered": 1}
    assert ledger(run.record) == database(run.db, before_ids(run.journal))


def test_secrets_in_the_upstream_url_and_headers_are_written_nowhere(tmp_path: Path) -> None:
    """A key in the URL's query string and one in a header: neither reaches the manifest, the
    journal, the record or stderr — nor their percent-encoded, JSON-escaped or base64 forms,
    here sent back in an argument."""
    query, header = "qs-secret-5a6b7c8d9e", "hdr-secret-1f2e3d4c5b"
    db, out = tmp_path / "orders.db", tmp_path / "run"

    async def echo(agent: Agent) -> None:
        await agent.call("create_order", agent.order())
        await agent.call("list_orders", {"customer_id": quote(query, safe="")})
        basic = base64.b64encode(f"shop:{header}".encode()).decode()  # Authorization: Basic
        await agent.call("list_orders", {"customer_id": basic})
        await agent.finish()

    with HttpOrders(db) as server:
        args = ["proxy", "--upstream-url", f"{server.url}?tenant=acme&api_key={query}",
                "--upstream-header", f"X-Api-Key: {header}", "--world", str(WORLD),
                "--template", "orders_place", "--time-scale", SCALE, "--out", str(out)]
        run = run_stdio(tmp_path, "none", echo, args=args)
    assert len(rows(db, "orders")) == 1 and run.record["outcome"]["exactly_once"]
    assert "api_key=***" in run.record["runtime"]["proxy"]["upstream"]
    forms = variants(query) | variants(header)
    texts = {str(p): p.read_text(errors="replace") for p in out.rglob("*") if p.is_file()}
    texts["stderr"] = run.stderr
    for name, text in texts.items():
        assert not [f for f in forms if f in text], name
