"""A team's own MCP server, as a user would write it: an orders service over a real SQLite file,
built with the ``mcp`` SDK (``MCPServer``), for the proxy's tests (issue 30).

    python tests/support/orders_server.py DB [--http PORT]

Tools: ``create_order`` (an optional ``idempotency_key`` that deduplicates, as payment APIs'
do: the same key and arguments return the first order; other arguments are refused),
``refund_order`` (a second refund is refused), ``add_lines`` (lines added one by one, each
committed on its own: not atomic) and ``list_orders`` / ``list_lines``; a resource (the refund
policy), a resource template (one order) and a prompt (``daily_report``), which a proxy in
front of it must pass through. Every write commits
before it answers. The tools are coroutines: they run one at a time on the server's event loop,
which owns the connection.

Knobs for the tests, from the environment, each a way real servers differ from the example:

- ``ORDERS_SLOW_SKU`` / ``ORDERS_SLOW_S``: a ``create_order`` for that sku commits, then waits
  that many seconds before answering (slow after committing; a large value: it hangs);
- ``ORDERS_CRASH_SKU``: a ``create_order`` for that sku commits, then the server exits without
  answering;
- ``ORDERS_REFUSE_FIRST``: the server's first ``create_order`` is refused (a tool error, no
  row), as a busy server refuses a request;
- ``ORDERS_IGNORE_KEYS``: ``idempotency_key`` is accepted and ignored (every call a new order);
- ``ORDERS_PROSE``: ``create_order`` answers in prose, with no order id;
- ``ORDERS_PAD_BYTES``: every tool answer carries that many bytes more (a ``receipt`` field);
- ``ORDERS_EXIT_S``: once its stdin closes the server takes that many seconds to exit, and
  ignores SIGTERM meanwhile (a server flushing its state on the way out).

``--http PORT`` serves streamable HTTP answering with JSON bodies; ``--sse`` with event streams,
the SDK's default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

SCHEMA = """
create table if not exists orders (
    order_id text primary key, customer_id text not null, sku text not null,
    quantity integer not null, status text not null, idempotency_key text unique);
create table if not exists lines (
    line_id text primary key, order_id text not null, sku text not null, note text);
"""


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA)
    return conn


def rows(db: Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` (for the tests to compare with the ledger)."""
    with connect(db) as conn:
        return [dict(r) for r in conn.execute(f"select * from {table} order by rowid")]


def padded(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer``, with ``ORDERS_PAD_BYTES`` more bytes when that is set."""
    pad = int(os.environ.get("ORDERS_PAD_BYTES") or 0)
    return {**answer, "receipt": "r" * pad} if pad else answer


def build(db: Path) -> MCPServer:
    server = MCPServer("orders", instructions="Orders of a small web shop.", log_level="ERROR",
                       version="3.1.4")
    conn = connect(db)
    refused: list[bool] = []

    def next_id(prefix: str, table: str) -> str:
        (n,) = conn.execute(f"select count(*) from {table}").fetchone()
        return f"{prefix}_{n + 1:04d}"

    def order(order_id: str) -> dict[str, Any]:
        row = conn.execute("select * from orders where order_id = ?", (order_id,)).fetchone()
        if row is None:
            raise ToolError(json.dumps({"error": "not_found", "order_id": order_id}))
        return {k: row[k] for k in ("order_id", "customer_id", "sku", "quantity", "status")}

    async def place(customer_id: str, sku: str, quantity: int, idempotency_key: str | None
                    ) -> dict[str, Any]:
        if os.environ.get("ORDERS_REFUSE_FIRST") and not refused:
            refused.append(True)
            raise ToolError("the shop is busy: try again")
        if os.environ.get("ORDERS_IGNORE_KEYS"):
            idempotency_key = None
        if idempotency_key is not None:
            seen = conn.execute("select * from orders where idempotency_key = ?",
                                (idempotency_key,)).fetchone()
            if seen is not None:
                if (seen["customer_id"], seen["sku"], seen["quantity"]) != (customer_id, sku,
                                                                           quantity):
                    raise ToolError("idempotency_key reused with other arguments")
                return {**order(seen["order_id"]), "idempotent_replayed": True}
        order_id = next_id("ord", "orders")
        conn.execute("insert into orders values (?, ?, ?, ?, 'placed', ?)",
                     (order_id, customer_id, sku, quantity, idempotency_key))
        if sku == os.environ.get("ORDERS_CRASH_SKU"):
            os._exit(3)  # committed, then the server dies before answering
        if sku == os.environ.get("ORDERS_SLOW_SKU"):
            await asyncio.sleep(float(os.environ.get("ORDERS_SLOW_S", "5")))  # committed
        return order(order_id)

    if os.environ.get("ORDERS_PROSE"):
        @server.tool()
        async def create_order(customer_id: str, sku: str, quantity: int,
                               idempotency_key: str | None = None) -> str:
            """Place an order."""
            await place(customer_id, sku, quantity, idempotency_key)
            return f"Order placed: {quantity} x {sku} for {customer_id}." + padded({}).get(
                "receipt", "")
    else:
        @server.tool()
        async def create_order(customer_id: str, sku: str, quantity: int,
                               idempotency_key: str | None = None,
                               api_token: str | None = None) -> dict[str, Any]:
            """Place an order. Returns the order with its order_id. An idempotency_key makes a
            repeat return the first order instead of placing another. (api_token: a credential
            the shop's API takes; this test server ignores it.)"""
            return padded(await place(customer_id, sku, quantity, idempotency_key))

    @server.tool()
    async def refund_order(order_id: str) -> dict[str, Any]:
        """Refund an order in full. A refunded order cannot be refunded again."""
        if order(order_id)["status"] != "placed":
            raise ToolError(f"order {order_id} is already refunded")
        conn.execute("update orders set status = 'refunded' where order_id = ?", (order_id,))
        return padded(order(order_id))

    @server.tool()
    async def add_lines(order_id: str, lines: list[dict[str, str]]) -> dict[str, Any]:
        """Add lines to an order, one by one (not atomic)."""
        order(order_id)
        added = []
        for line in lines:
            line_id = next_id("ln", "lines")
            conn.execute("insert into lines values (?, ?, ?, ?)",
                         (line_id, order_id, line["sku"], line.get("note")))
            added.append(line_id)
        return padded({"order_id": order_id, "line_ids": added})

    @server.tool()
    async def list_orders(customer_id: str | None = None) -> dict[str, Any]:
        """List orders (oldest first), optionally of one customer."""
        query, args = "select order_id from orders", ()
        if customer_id is not None:
            query, args = query + " where customer_id = ?", (customer_id,)
        return padded({"orders": [order(r[0]) for r in conn.execute(query + " order by rowid",
                                                                     args)]})

    @server.tool()
    async def list_lines(order_id: str) -> dict[str, Any]:
        """List the lines of an order."""
        found = conn.execute("select * from lines where order_id = ? order by rowid",
                             (order_id,))
        return padded({"lines": [dict(r) for r in found]})

    @server.resource("orders://policy/refunds", mime_type="text/plain")
    def refund_policy() -> str:
        """The shop's refund policy."""
        return "An order is refunded once, in full."

    @server.resource("orders://order/{order_id}", mime_type="application/json")
    def one_order(order_id: str) -> str:
        """One order."""
        return json.dumps(order(order_id))

    @server.prompt()
    def daily_report(day: str) -> str:
        """Summarise the orders of one day."""
        return f"List the orders placed on {day} and summarise them."

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", type=Path)
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--sse", action="store_true", help="answer over HTTP with event streams")
    args = parser.parse_args()
    server = build(args.db)
    exit_s = float(os.environ.get("ORDERS_EXIT_S") or 0)
    if exit_s:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.http is None:
        server.run("stdio")
        time.sleep(exit_s)
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http,
                   json_response=not args.sse)


if __name__ == "__main__":
    main()
