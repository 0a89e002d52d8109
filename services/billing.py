"""Billing: charges with an idempotency key (as the most trusted payment APIs offer) and a
naturally idempotent full refund; the charge list is strongly consistent."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

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

CUSTOMERS = tuple(f"cus_{n}" for n in range(100, 160))


@service("billing")
class Billing(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.charges = VersionedTable()

    @write(
        idempotency="keyed",
        native_key=True,
        readback=lambda a: ReadBack(
            "list_charges", {"customer_id": a["customer_id"], "limit": 50},
            {"amount_cents": a["amount_cents"], "currency": a["currency"],
             "description": a["description"]}),
    )
    def create_charge(
        self,
        ctx: OpContext,
        customer_id: str,
        amount_cents: Annotated[int, Field(gt=0, le=10_000_000)],
        currency: Literal["usd", "eur", "gbp"],
        description: str,
    ) -> Result:
        """Charge a customer's saved payment method. amount_cents is an integer number of
        cents. Returns the charge."""
        if customer_id not in CUSTOMERS:
            return error("not_found", f"no customer {customer_id}")
        charge_id = self.mint("ch")
        row = {"charge_id": charge_id, "customer_id": customer_id, "amount_cents": amount_cents,
               "currency": currency, "description": description, "status": "succeeded"}
        self.charges.put(charge_id, row, ctx.now)
        ctx.commit({k: row[k] for k in ("customer_id", "amount_cents", "currency", "description")},
                   charge_id)
        return ok(charge=row)

    @read()
    def list_charges(self, view: View, customer_id: str | None = None, limit: int = 20) -> Result:
        """List charges (newest first), including refunded ones; optionally for one customer."""
        rows = [r for _, r in self.charges.scan(view)
                if customer_id is None or r["customer_id"] == customer_id]
        return ok(items=rows[::-1][:limit])

    @write(
        idempotency="natural",
        readback=lambda a: ReadBack("list_charges", {"limit": 50},
                                    {"charge_id": a["charge_id"], "status": "refunded"}),
    )
    def refund_charge(self, ctx: OpContext, charge_id: str) -> Result:
        """Fully refund a charge. Refunding an already-refunded charge returns 409."""
        row = self.charges.current(charge_id)
        if row is None:
            return error("not_found", f"no charge {charge_id}")
        if row["status"] == "refunded":
            return error("conflict", f"charge {charge_id} is already refunded")
        self.charges.put(charge_id, {**row, "status": "refunded"}, ctx.now)
        ctx.commit({"charge_id": charge_id}, charge_id, reverses=charge_id)
        return ok(charge={**row, "status": "refunded"})
