"""Mail: sending is neither idempotent nor reversible (SMTP has no key), and the sent-mail
search lags two minutes."""

from __future__ import annotations

from limbo.sim.results import Result, ok
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


@service("mail")
class Mail(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.sent = VersionedTable()

    @write(reversibility="irreversible",
           readback=lambda a: ReadBack("search_sent", {"query": a["subject"]},
                                       {"to": a["to"], "subject": a["subject"]}))
    def send(self, ctx: OpContext, to: str, subject: str, body: str) -> Result:
        """Send an email. Returns the message_id. A sent message takes up to 120 s to become
        searchable in mail_search_sent."""
        message_id = self.mint("msg")
        self.sent.put(message_id, {"message_id": message_id, "to": to, "subject": subject,
                                   "body": body}, ctx.now)
        ctx.commit({"to": to, "subject": subject, "body": body}, message_id)
        return ok(message_id=message_id)

    @read(lag=120.0, note="Sent mail takes up to 120 s to become searchable.")
    def search_sent(self, view: View, query: str) -> Result:
        """Search sent mail by text in the subject or body (newest first)."""
        q = query.lower()
        rows = [r for _, r in self.sent.scan(view) if q in r["subject"].lower() or q in r["body"].lower()]
        return ok(items=rows[::-1])
