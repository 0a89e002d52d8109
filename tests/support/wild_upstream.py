"""An MCP server over stdio that misbehaves at the wire, for the proxy's fuzz test: the orders of
:mod:`support.orders_server` in the same SQLite schema, written without the SDK so that it can
answer what no SDK would.

    python tests/support/wild_upstream.py DB SEED

The handshake and the tool listing are proper. Each ``create_order`` commits the order (one that
fails to answer may, by the draw, not), then answers in one of the ways a broken server does, drawn from
``random.Random(SEED * 1000 + n)`` for its n-th call: properly; garbage and no answer; no
answer at all (a hang); an answer under another id, or an id of the wrong type; a huge answer;
an answer nested 100,000 deep; a lone surrogate; an error whose code is text; a result that is
no object; a batch holding the answer; a request of its own (``ping``, sampling) or a log
notification before the answer; a banner line on stdout. ``list_orders`` always answers
properly, from the database: reconciliation can then settle every write the proxy lost.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.orders_server import connect  # run as a script: tests/ on the path first

TOOLS = [{"name": name, "inputSchema": {"type": "object"}}
         for name in ("create_order", "list_orders")]
WAYS = ["proper", "proper", "garbage", "hang", "other_id", "string_id", "huge", "deep",
        "surrogate", "text_code", "not_object", "batch", "ask_first", "banner", "nan"]
ANSWERED = {"proper", "banner", "ask_first", "huge", "batch", "nan"}
"""The ways that carry a success: the order is then committed (the server lies about no
commit, only about how it answers)."""


def out(line: bytes | str) -> None:
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def send(message: dict[str, Any]) -> None:
    out(json.dumps({"jsonrpc": "2.0", **message}))


def result(body: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(body)}],
            "structuredContent": body if isinstance(body, dict) else None}


def answer_wildly(ident: Any, body: dict[str, Any], way: str) -> None:
    """Answer request ``ident`` (``body``: the proper result) the ``way`` drawn."""
    proper = {"id": ident, "result": result(body)}
    if way in ("proper", "banner", "ask_first"):
        if way == "banner":
            out("orders server: order placed")
        if way == "ask_first":
            send({"id": f"srv-{ident}", "method": "ping"})
            send({"id": f"srv-s-{ident}", "method": "sampling/createMessage", "params": {}})
            send({"method": "notifications/message", "params": {"level": "info", "data": "x"}})
        send(proper)
    elif way == "garbage":
        out(b"\xff\xfe garbage " + json.dumps(body).encode()[:20])
    elif way == "other_id":
        send({**proper, "id": ident + 1000})
    elif way == "string_id":
        send({**proper, "id": str(ident)})
    elif way == "huge":
        send({"id": ident, "result": result({**body, "pad": "p" * 3_000_000})})
    elif way == "deep":
        out(f'{{"jsonrpc": "2.0", "id": {ident}, "result": ' + "[" * 100_000 + "]" * 100_000
            + "}")
    elif way == "surrogate":
        out(json.dumps({"jsonrpc": "2.0", **proper}).replace('"placed"', '"\\ud800"'))
    elif way == "text_code":
        send({"id": ident, "error": {"code": "E_BUSY", "message": {"nested": True}}})
    elif way == "not_object":
        send({"id": ident, "result": ["not", "an", "object"]})
    elif way == "batch":
        out(json.dumps([{"jsonrpc": "2.0", **proper}]))
    elif way == "nan":
        out(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result({**body,
                                                                          "x": float("nan")})}))
    # "hang": nothing at all


def main() -> None:
    db, seed = Path(sys.argv[1]), int(sys.argv[2])
    conn = connect(db)
    calls = 0
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            continue  # a notification, or the answer to one of our requests
        method, ident = msg["method"], msg["id"]
        params = msg.get("params") or {}
        if method == "initialize":
            send({"id": ident, "result": {"protocolVersion": params["protocolVersion"],
                                          "capabilities": {"tools": {}},
                                          "serverInfo": {"name": "wild", "version": "0.1"}}})
        elif method == "tools/list":
            send({"id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") == "list_orders":
            rows = conn.execute("select order_id, customer_id, sku, quantity, status "
                                "from orders order by rowid").fetchall()
            send({"id": ident, "result": result({"orders": [dict(r) for r in rows]})})
        elif method == "tools/call":
            calls += 1
            draw = random.Random(seed * 1000 + calls)
            args = params.get("arguments") or {}
            order_id, way = f"ord_{calls:04d}", draw.choice(WAYS)
            if way in ANSWERED or draw.random() < 0.7:  # committed before it (fails to) answer
                conn.execute("insert into orders values (?, ?, ?, ?, 'placed', null)",
                             (order_id, str(args.get("customer_id")), str(args.get("sku")),
                              int(args.get("quantity") or 1)))
            answer_wildly(ident, {"order_id": order_id, **args, "status": "placed"}, way)
        else:
            send({"id": ident, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
