"""Billing: create_charge honours a key natively; a full refund is naturally idempotent (a
repeat is 409 and commits nothing); the charge list is strong, newest first."""

from __future__ import annotations

import pytest
from support.worlds import deliver, make_world

from limbo.sim.service import CONTRACTS

CHARGE = {"customer_id": "cus_117", "amount_cents": 4200, "currency": "usd",
          "description": "INV-0031"}


@pytest.mark.parametrize("contract", CONTRACTS)
def test_charge_key_replay_returns_first_response(contract: str) -> None:
    world = make_world(contract)
    first = deliver(world, "billing_create_charge", {**CHARGE, "idempotency_key": "k"}, when=3)
    again = deliver(world, "billing_create_charge", {**CHARGE, "idempotency_key": "k"}, when=900)
    assert again == {**first, "idempotent_replayed": True}
    assert len(world.ledger) == 1
    listed = deliver(world, "billing_list_charges", {"customer_id": "cus_117"})
    assert len(listed["items"]) == 1


def test_charge_without_key_charges_twice() -> None:
    world = make_world("native")
    a, b = deliver(world, "billing_create_charge", CHARGE), deliver(world, "billing_create_charge", CHARGE)
    assert a["charge"]["charge_id"] != b["charge"]["charge_id"]
    assert len(world.ledger) == 2


@pytest.mark.parametrize("change", [{"amount_cents": 4300}, {"currency": "eur"},
                                    {"description": "INV-0032"}, {"customer_id": "cus_101"}])
def test_charge_key_with_other_arguments_is_422(change: dict) -> None:
    world = make_world("native")
    deliver(world, "billing_create_charge", {**CHARGE, "idempotency_key": "k"})
    got = deliver(world, "billing_create_charge", {**CHARGE, **change, "idempotency_key": "k"})
    assert got["ok"] is False
    assert got["error"]["kind"] == "idempotency_mismatch" and got["error"]["status"] == 422
    assert len(world.ledger) == 1
    assert len(deliver(world, "billing_list_charges", {})["items"]) == 1


def test_refund_twice_is_409_without_a_second_effect() -> None:
    world = make_world("native")
    charge = deliver(world, "billing_create_charge", CHARGE)["charge"]
    first = deliver(world, "billing_refund_charge", {"charge_id": charge["charge_id"]})
    second = deliver(world, "billing_refund_charge", {"charge_id": charge["charge_id"]})
    assert first["ok"] and first["charge"]["status"] == "refunded"
    assert second["error"]["kind"] == "conflict" and second["error"]["status"] == 409
    assert "already refunded" in second["error"]["message"]
    assert [e["op"] for e in world.ledger] == ["create_charge", "refund_charge"]
    assert world.ledger[1]["reverses"] == charge["charge_id"]
    assert world.ledger[1]["write_class"]["idempotency"] == "natural"


def test_refund_of_unknown_charge_is_404() -> None:
    world = make_world("native")
    got = deliver(world, "billing_refund_charge", {"charge_id": "ch_nope"})
    assert got["error"]["kind"] == "not_found"
    assert world.ledger == []


def test_unknown_customer_is_404_and_commits_nothing() -> None:
    world = make_world("native")
    got = deliver(world, "billing_create_charge", {**CHARGE, "customer_id": "cus_999"})
    assert got["error"]["kind"] == "not_found"
    assert world.ledger == []


def test_list_charges_is_strong_newest_first_and_includes_refunded() -> None:
    world = make_world("native")
    a = deliver(world, "billing_create_charge", CHARGE, when=10)["charge"]
    b = deliver(world, "billing_create_charge", {**CHARGE, "amount_cents": 100})["charge"]
    deliver(world, "billing_refund_charge", {"charge_id": a["charge_id"]})
    items = deliver(world, "billing_list_charges", {"customer_id": "cus_117"})["items"]
    assert [(c["charge_id"], c["status"]) for c in items] == [
        (b["charge_id"], "succeeded"), (a["charge_id"], "refunded")]
    assert deliver(world, "billing_list_charges", {"customer_id": "cus_101"})["items"] == []


def test_stale_view_shows_the_charge_before_its_refund() -> None:
    world = make_world("native")
    a = deliver(world, "billing_create_charge", CHARGE, when=10)["charge"]
    deliver(world, "billing_refund_charge", {"charge_id": a["charge_id"]}, when=20)
    stale = deliver(world, "billing_list_charges", {}, when=30, stale_as_of=15.0)
    assert [c["status"] for c in stale["items"]] == ["succeeded"]
    before = deliver(world, "billing_list_charges", {}, stale_as_of=5.0)
    assert before["items"] == []


def test_write_classes() -> None:
    world = make_world("native")
    charge = deliver(world, "billing_create_charge", CHARGE)["charge"]
    deliver(world, "billing_refund_charge", {"charge_id": charge["charge_id"]})
    assert world.ledger[0]["write_class"] == {"idempotency": "keyed", "read_path": "strong",
                                              "reversibility": "reversible"}
    assert world.ledger[1]["write_class"]["idempotency"] == "natural"
