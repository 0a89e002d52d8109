"""A gallery of small MCP servers for ``limbo conform``'s tests: one payments-and-email API over
a real SQLite file, built with the ``mcp`` SDK, in flavours that each break one exactly-once
promise the way real servers do.

    python tests/support/conform_gallery.py FLAVOUR DB [--http PORT] [--lease S]

Tools: ``create_charge`` and ``send_email`` (writes with an optional ``idempotency_key``,
``destructiveHint: false``), ``list_charges`` and ``list_emails`` (reads), ``get_balance``
(``readOnlyHint: true``).

Flavours (:data:`FLAVOURS`):

- ``correct``: keys kept in SQLite per tool; a repeat returns the stored answer; a reused key
  with other arguments is refused;
- ``ignores_keys``: the key is accepted and ignored (every call a new effect);
- ``shared_scope``: one key table for all tools, and a key first used on another tool returns
  that tool's stored answer (a global idempotency middleware keyed by the key alone);
- ``restart_forgets``: keys kept in memory (lost when the process restarts; with ``--lease
  S`` they also expire S seconds after first use);
- ``first_result``: a reused key with other arguments silently returns the first answer;
- ``lying_idempotent``: ``create_charge`` says ``idempotentHint: true``, yet each call without
  a key charges again;
- ``readonly_writes``: ``get_balance`` says ``readOnlyHint: true``, yet emails a statement.

With ``GALLERY_CRASH_TOOL=send_email`` in its environment, any flavour exits the moment that
tool has committed, before it answers (a server that dies mid-call).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

FLAVOURS = ("correct", "ignores_keys", "shared_scope", "restart_forgets", "first_result",
            "lying_idempotent", "readonly_writes")
SCHEMA = """
create table if not exists charges (charge_id text primary key, customer text not null,
    amount_cents integer not null);
create table if not exists emails (email_id text primary key, "to" text not null,
    subject text not null);
create table if not exists keys (scope text primary key, tool text not null, args text not null,
    answer text not null);
"""


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA)
    return conn


class Keys:
    """Where the flavour keeps its keys: (tool, args, answer) by scope."""

    def __init__(self, conn: sqlite3.Connection, flavour: str, lease: float | None) -> None:
        self.conn, self.flavour, self.lease = conn, flavour, lease
        self.memory: dict[str, tuple[str, str, str, float]] = {}

    def scope(self, tool: str, key: str) -> str:
        return key if self.flavour == "shared_scope" else f"{tool}\x00{key}"

    def get(self, scope: str) -> tuple[str, str, str] | None:
        if self.flavour == "restart_forgets":
            found = self.memory.get(scope)
            if found is None or (self.lease and time.monotonic() - found[3] > self.lease):
                return None
            return found[:3]
        row = self.conn.execute("select tool, args, answer from keys where scope = ?",
                                (scope,)).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def put(self, scope: str, tool: str, args: str, answer: str) -> None:
        if self.flavour == "restart_forgets":
            self.memory[scope] = (tool, args, answer, time.monotonic())
        else:
            self.conn.execute("insert into keys values (?, ?, ?, ?)", (scope, tool, args, answer))


def keyed(keys: Keys, tool: str, key: str | None, args: dict[str, Any], do: Any
          ) -> dict[str, Any]:
    """``do()``'s answer, under the flavour's key rules."""
    if key is None or keys.flavour == "ignores_keys":
        return do()
    scope, plain = keys.scope(tool, key), json.dumps(args, sort_keys=True)
    found = keys.get(scope)
    if found is not None:
        stored_tool, stored_args, answer = found
        if stored_tool == tool and stored_args != plain and keys.flavour != "first_result":
            raise ToolError("idempotency_key reused with other arguments")
        return json.loads(answer)
    answer = do()
    keys.put(scope, tool, plain, json.dumps(answer))
    return answer


def build(flavour: str, db: Path, lease: float | None) -> MCPServer:
    server = MCPServer(f"gallery-{flavour}", log_level="ERROR", version="1.0")
    conn = connect(db)
    keys = Keys(conn, flavour, lease)
    write = ToolAnnotations(readOnlyHint=False, destructiveHint=False,
                            idempotentHint=flavour == "lying_idempotent")
    read = ToolAnnotations(readOnlyHint=True)

    def next_id(prefix: str, table: str) -> str:
        (n,) = conn.execute(f"select count(*) from {table}").fetchone()
        return f"{prefix}_{n + 1:04d}"

    def email(to: str, subject: str) -> dict[str, Any]:
        email_id = next_id("em", "emails")
        conn.execute("insert into emails values (?, ?, ?)", (email_id, to, subject))
        return {"email_id": email_id, "to": to, "subject": subject}

    @server.tool(annotations=write)
    async def create_charge(customer: str, amount_cents: int,
                            idempotency_key: str | None = None) -> dict[str, Any]:
        """Charge a customer. A repeat with the same idempotency_key returns the first
        charge."""
        def do() -> dict[str, Any]:
            charge_id = next_id("ch", "charges")
            conn.execute("insert into charges values (?, ?, ?)",
                         (charge_id, customer, amount_cents))
            return {"charge_id": charge_id, "customer": customer, "amount_cents": amount_cents}

        return keyed(keys, "create_charge", idempotency_key,
                     {"customer": customer, "amount_cents": amount_cents}, do)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
    async def send_email(to: str, subject: str,
                         idempotency_key: str | None = None) -> dict[str, Any]:
        """Send an email. A repeat with the same idempotency_key does not send it again."""
        answer = keyed(keys, "send_email", idempotency_key, {"to": to, "subject": subject},
                       lambda: email(to, subject))
        if os.environ.get("GALLERY_CRASH_TOOL") == "send_email":
            os._exit(3)  # committed, and gone before answering
        return answer

    @server.tool(annotations=read)
    async def list_charges(customer: str) -> dict[str, Any]:
        """The customer's charges."""
        rows = conn.execute("select * from charges where customer = ? order by rowid",
                            (customer,))
        return {"charges": [dict(r) for r in rows]}

    @server.tool(annotations=read)
    async def list_emails() -> dict[str, Any]:
        """Every email sent."""
        return {"emails": [dict(r) for r in conn.execute("select * from emails order by rowid")]}

    @server.tool(annotations=read)
    async def get_balance(customer: str) -> dict[str, Any]:
        """The customer's balance."""
        (total,) = conn.execute("select coalesce(sum(amount_cents), 0) from charges where "
                                "customer = ?", (customer,)).fetchone()
        if flavour == "readonly_writes":
            email(customer, f"your balance is {total}")
        return {"customer": customer, "balance_cents": total}

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("flavour", choices=FLAVOURS)
    parser.add_argument("db", type=Path)
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--lease", type=float, help="restart_forgets: keys expire after S s")
    parser.add_argument("--api-key", help="a credential, as real servers take one (ignored)")
    args = parser.parse_args()
    server = build(args.flavour, args.db, args.lease)
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http, json_response=True)


if __name__ == "__main__":
    main()
