"""Tickets: non-idempotent create and comment, a conditional status change, a strong recent
list and a search index that lags two minutes (as ticket systems' search indexes do)."""

from __future__ import annotations

from typing import Any, Literal

from limbo.sim.results import Result, error, ok
from limbo.sim.service import (
    OpContext,
    ReadBack,
    Service,
    VersionedTable,
    View,
    read,
    service,
    write,
)

Priority = Literal["low", "normal", "high", "urgent"]
Status = Literal["open", "pending", "resolved", "closed"]


@service("tickets")
class Tickets(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.tickets = VersionedTable()

    @write(readback=lambda a: ReadBack("list_recent", {"limit": 50},
                                       {"title": a["title"], "body": a["body"]}))
    def create(self, ctx: OpContext, title: str, body: str, priority: Priority = "normal") -> Result:
        """Open a new ticket. Returns its ticket_id."""
        ticket_id = self.mint("T")
        row = {"ticket_id": ticket_id, "title": title, "body": body, "priority": priority,
               "status": "open", "comments": []}
        self.tickets.put(ticket_id, row, ctx.now)
        ctx.commit({"title": title, "body": body, "priority": priority}, ticket_id)
        return ok(ticket_id=ticket_id, status="open")

    @write(readback=lambda a: ReadBack("list_recent", {"limit": 50}, {"body": a["body"]},
                                       parent={"ticket_id": a["ticket_id"]}, nested="comments"))
    def add_comment(self, ctx: OpContext, ticket_id: str, body: str) -> Result:
        """Add a comment to a ticket. Returns the comment_id."""
        row = self.tickets.current(ticket_id)
        if row is None:
            return error("not_found", f"no ticket {ticket_id}")
        comment_id = self.mint("c")
        comment = {"comment_id": comment_id, "body": body}
        self.tickets.put(ticket_id, {**row, "comments": [*row["comments"], comment]}, ctx.now)
        ctx.commit({"ticket_id": ticket_id, "body": body}, comment_id)
        return ok(comment_id=comment_id, ticket_id=ticket_id)

    @write(idempotency="conditional",
           readback=lambda a: ReadBack("list_recent", {"limit": 50},
                                       {"ticket_id": a["ticket_id"], "status": a["status"]}))
    def update_status(
        self, ctx: OpContext, ticket_id: str, status: Status, expected_status: Status
    ) -> Result:
        """Change a ticket's status, only if its current status equals expected_status;
        otherwise returns 409 with the current status."""
        row = self.tickets.current(ticket_id)
        if row is None:
            return error("not_found", f"no ticket {ticket_id}")
        if row["status"] != expected_status:
            return error("conflict", f"ticket {ticket_id} is {row['status']}, not {expected_status}",
                         current_status=row["status"])
        history = row.get("_history", [])
        # Undoing: back to an earlier status reverts a status change, and closing a ticket is
        # how a duplicate one is cleaned up (tickets are reversible "via status").
        reverts = status in history or status == "closed"
        self.tickets.put(ticket_id, {**row, "status": status,
                                     "_history": [*history, row["status"]]}, ctx.now)
        ctx.commit({"ticket_id": ticket_id, "status": status, "expected_status": expected_status},
                   ticket_id, reverses=ticket_id if reverts else None)
        return ok(ticket_id=ticket_id, status=status)

    @read()
    def list_recent(self, view: View, limit: int = 20) -> Result:
        """List the most recent tickets (newest first) with their status and comments."""
        rows = [_public(r) for _, r in self.tickets.scan(view)]
        return ok(items=rows[::-1][:limit])

    @read(lag=120.0, note="The search index lags: new tickets and comments take up to 120 s to appear.")
    def search(self, view: View, query: str) -> Result:
        """Search tickets by text in title, body or comments."""
        def hit(r: dict[str, Any]) -> bool:
            texts = [r["title"], r["body"], *(c["body"] for c in r["comments"])]
            return any(query.lower() in t.lower() for t in texts)

        return ok(items=[_public(r) for _, r in self.tickets.scan(view) if hit(r)][::-1])


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_")}
