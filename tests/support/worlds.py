"""Worlds for the contract tests: a world at a controlled sim time, and requests delivered
straight to the endpoint (no latency, no fault). ``test_support_worlds.py`` checks that
:func:`sample_writes` covers every write the services offer."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from limbo.sim.cell import Cell
from limbo.sim.request import Request
from limbo.sim.results import Result
from limbo.sim.tasks import templates
from limbo.sim.tools import KEY_FIELD
from limbo.sim.world import World

_ids = itertools.count(1)


def make_world(contract: str = "native", template: str = "charge_invoice") -> World:
    """A fault-free world (fault ``none``) for ``template``; its setup has run, the ledger is
    empty and the clock is at 0."""
    t = templates()[template]
    return World.of(Cell(service=t.service, template=template, focal_write=t.focal_writes[0],
                      contract=contract, fault="none"))


def at(world: World, t: float) -> None:
    """Advance the sim clock to ``t`` (never backwards)."""
    if t > world.now:
        world.env.run(until=t)
    assert world.now == pytest.approx(t)


def request(world: World, tool: str, args: dict[str, Any], **shape: Any) -> Request:
    """A validated request for ``tool``; ``idempotency_key`` in ``args`` becomes the key."""
    checked = world.boundary.validate(tool, dict(args))
    assert not isinstance(checked, dict), checked
    spec, valid = checked
    key = valid.pop(KEY_FIELD, None)
    assert spec.op is not None
    return Request(id=f"t{next(_ids)}", op=spec.op, args=valid, key=key,
                   attempt=shape.pop("attempt", "original"), issued_at=world.now, **shape)


def deliver(world: World, tool: str, args: dict[str, Any], *, when: float | None = None,
            **shape: Any) -> Result:
    """Deliver one request to the endpoint at sim time ``when`` (default: now)."""
    if when is not None:
        at(world, when)
    return world.endpoint.deliver(request(world, tool, args, **shape))


def ledger_tools(world: World) -> list[str]:
    return [e["tool"] for e in world.ledger]


def sample_writes(world: World) -> dict[str, dict[str, Any]]:
    """Valid arguments for every write tool, creating what they need outside the ledger
    (a charge to refund, a post to delete, a ticket to comment on)."""
    ticket = world.services["tickets"].tickets
    ticket_id = next(iter(dict(ticket.scan(_view(world)))), None)
    if ticket_id is None:
        ticket_id = _setup(world, "tickets_create", {"title": "t", "body": "b"})["ticket_id"]
    charge = _setup(world, "billing_create_charge", {"customer_id": "cus_120", "amount_cents": 700,
                                                     "currency": "eur", "description": "S-1"})
    post = _setup(world, "social_publish", {"platform": "linkedin", "text": "to delete"})
    return {
        "social_publish": {"platform": "weibo", "text": "hello"},
        "social_delete_post": {"platform": "linkedin", "post_id": post["post_id"]},
        "billing_create_charge": {"customer_id": "cus_101", "amount_cents": 4200,
                                  "currency": "usd", "description": "INV-1"},
        "billing_refund_charge": {"charge_id": charge["charge"]["charge_id"]},
        "tickets_create": {"title": "Disk full", "body": "on db-3", "priority": "high"},
        "tickets_add_comment": {"ticket_id": ticket_id, "body": "looking"},
        "tickets_update_status": {"ticket_id": ticket_id, "status": "pending",
                                  "expected_status": "open"},
        "mail_send": {"to": "a@example.com", "subject": "Hi", "body": "there"},
        "data_insert": {"table": "leads", "row": {"email": "x@example.net", "n": 1}},
        "data_insert_many": {"table": "leads", "rows": [{"n": i} for i in range(4)]},
        "data_upsert": {"table": "profiles", "key": "acct-1", "row": {"tier": "gold"}},
        "deploy_trigger": {"service": "gateway", "version": "1.2.3", "environment": "staging"},
    }


def _view(world: World) -> Any:
    from limbo.sim.service import View

    return View(world.now)


def _setup(world: World, tool: str, args: dict[str, Any]) -> Result:
    """Run a write directly on its service (no ledger, no key store): test preparation."""
    from limbo.sim.service import OpContext

    spec = world.tools[tool]
    assert spec.op is not None
    valid = spec.model.model_validate(args).model_dump()
    valid.pop(KEY_FIELD, None)
    result = world.services[spec.op.service].call(spec.op.name, OpContext(world.now), valid)
    assert result["ok"], result
    return result
