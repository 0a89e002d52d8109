"""The idempotency-key store of the contract (world.md §3): scope, fingerprint, retention,
what is recorded when, and the order in which a late original and a keyed retry arrive."""

from __future__ import annotations

import pytest
from support.worlds import deliver, make_world, request

from limbo.sim.endpoint import Endpoint
from limbo.sim.keystore import KeyRecord, ServiceKeyStore
from limbo.sim.tools import KEY_FIELD

CHARGE = {"customer_id": "cus_122", "amount_cents": 990, "currency": "gbp",
          "description": "INV-7", KEY_FIELD: "k"}
ROWS = {"table": "leads", "rows": [{"n": i} for i in range(5)], KEY_FIELD: "b"}


def _types(world) -> list[str]:
    return [e["type"] for e in world.log.events]


def test_replay_appends_no_effect_and_logs_a_replay_not_a_commit() -> None:
    world = make_world("native")
    deliver(world, "billing_create_charge", CHARGE)
    deliver(world, "billing_create_charge", CHARGE, attempt="reissue-1")
    assert len(world.ledger) == 1
    assert _types(world).count("commit") == 1 and _types(world).count("replay") == 1
    replay = next(e for e in world.log.events if e["type"] == "replay")
    assert replay["attempt"] == "reissue-1" and replay["key"] == "k"


def test_replay_returns_the_first_response_even_after_the_state_changed() -> None:
    world = make_world("native")
    first = deliver(world, "billing_create_charge", CHARGE)
    deliver(world, "billing_refund_charge", {"charge_id": first["charge"]["charge_id"]})
    again = deliver(world, "billing_create_charge", CHARGE)
    assert again["charge"]["status"] == "succeeded" and again["idempotent_replayed"] is True


def test_mismatch_executes_nothing_and_keeps_the_original_record() -> None:
    world = make_world("native")
    first = deliver(world, "billing_create_charge", CHARGE)
    bad = deliver(world, "billing_create_charge", {**CHARGE, "amount_cents": 991})
    assert bad["error"]["kind"] == "idempotency_mismatch"
    assert deliver(world, "billing_create_charge", CHARGE) == {**first, "idempotent_replayed": True}
    assert len(world.ledger) == 1 and "replay" in _types(world)


def test_same_key_on_another_operation_of_the_service_is_a_mismatch() -> None:
    world = make_world("keys-everywhere")
    charge = deliver(world, "billing_create_charge", CHARGE)["charge"]
    got = deliver(world, "billing_refund_charge", {"charge_id": charge["charge_id"], KEY_FIELD: "k"})
    assert got["error"]["kind"] == "idempotency_mismatch"
    assert len(world.ledger) == 1


def test_keys_are_scoped_per_service() -> None:
    world = make_world("keys-everywhere")
    deliver(world, "billing_create_charge", CHARGE)
    ticket = deliver(world, "tickets_create", {"title": "a", "body": "b", KEY_FIELD: "k"})
    assert ticket["ok"] and "idempotent_replayed" not in ticket
    assert [e["tool"] for e in world.ledger] == ["billing_create_charge", "tickets_create"]


def test_keys_are_scoped_per_principal() -> None:
    """Two callers sharing one server-side store never see each other's keys."""
    world = make_world("native")
    other = Endpoint(world.services, "native", "someone-else", world.log, world.ledger)
    other.keys = world.endpoint.keys
    deliver(world, "billing_create_charge", CHARGE)
    theirs = other.deliver(request(world, "billing_create_charge", CHARGE))
    assert theirs["ok"] and "idempotent_replayed" not in theirs
    assert len(world.ledger) == 2


def test_keystore_scope_and_expiry() -> None:
    store = ServiceKeyStore()
    store.record(("a", "billing"), "k", KeyRecord("fp", recorded_at=10.0, ttl_s=100.0))
    assert store.lookup(("b", "billing"), "k", 20.0) is None
    assert store.lookup(("a", "tickets"), "k", 20.0) is None
    assert store.lookup(("a", "billing"), "k", 110.0) is not None  # exactly at the ttl: kept
    assert store.lookup(("a", "billing"), "k", 110.5) is None
    assert store.lookup(("a", "billing"), "k", 20.0) is None  # pruned for good


@pytest.mark.parametrize(("contract", "tool", "args"), [
    ("native", "billing_create_charge", CHARGE),
    ("keys-everywhere", "tickets_create", {"title": "a", "body": "b", KEY_FIELD: "t"}),
    ("keys-everywhere", "social_publish", {"platform": "mastodon", "text": "x", KEY_FIELD: "p"}),
])
def test_keys_are_kept_24_h(contract: str, tool: str, args: dict) -> None:
    world = make_world(contract)
    deliver(world, tool, args, when=50)
    assert deliver(world, tool, args, when=50 + 86400 - 1)["idempotent_replayed"] is True
    assert len(world.ledger) == 1
    assert "idempotent_replayed" not in deliver(world, tool, args, when=50 + 86400 + 1)
    assert len(world.ledger) == 2


def test_native_mastodon_key_is_kept_one_hour() -> None:
    world = make_world("native")
    args = {"platform": "mastodon", "text": "x", KEY_FIELD: "p"}
    deliver(world, "social_publish", args, when=0.5)
    assert deliver(world, "social_publish", args, when=3600)["idempotent_replayed"] is True
    assert "idempotent_replayed" not in deliver(world, "social_publish", args, when=0.5 + 3601)
    assert len(world.ledger) == 2


def test_an_expired_key_can_be_reused_with_other_arguments() -> None:
    world = make_world("native")
    deliver(world, "billing_create_charge", CHARGE, when=1)
    got = deliver(world, "billing_create_charge", {**CHARGE, "amount_cents": 5}, when=1 + 86401)
    assert got["ok"] and len(world.ledger) == 2


def test_a_keyed_request_that_failed_without_committing_records_nothing() -> None:
    world = make_world("native")
    lost = deliver(world, "billing_create_charge", {**CHARGE, "customer_id": "cus_999"})
    assert lost["error"]["kind"] == "not_found"
    got = deliver(world, "billing_create_charge", CHARGE)  # same key, other args: no 422
    assert got["ok"] and "idempotent_replayed" not in got
    assert len(world.ledger) == 1


def test_a_conflict_is_not_recorded_so_a_retry_runs_against_the_new_state() -> None:
    world = make_world("keys-everywhere")
    t = deliver(world, "tickets_create", {"title": "a", "body": "b"})["ticket_id"]
    close = {"ticket_id": t, "status": "closed", "expected_status": "resolved", KEY_FIELD: "c"}
    assert deliver(world, "tickets_update_status", close)["error"]["kind"] == "conflict"
    deliver(world, "tickets_update_status", {"ticket_id": t, "status": "resolved",
                                             "expected_status": "open"})
    retry = deliver(world, "tickets_update_status", close)
    assert retry == {"ok": True, "ticket_id": t, "status": "closed"}
    assert [e["args"].get("status") for e in world.ledger] == [None, "resolved", "closed"]


def test_a_batch_cut_before_any_row_records_nothing() -> None:
    world = make_world("keys-everywhere")
    assert deliver(world, "data_insert_many", ROWS, cut_after=0)["ok"] is False
    assert world.ledger == []
    got = deliver(world, "data_insert_many", ROWS)
    assert got["ok"] and "idempotent_replayed" not in got and len(world.ledger) == 5


def test_a_request_that_fails_validation_records_nothing() -> None:
    world = make_world("native")
    bad = world.boundary.call("billing_create_charge", {**CHARGE, "amount_cents": "990"})
    assert bad["error"]["kind"] == "invalid_argument"
    good = world.boundary.call("billing_create_charge", {**CHARGE, "amount_cents": 5})
    assert good["ok"] and "idempotent_replayed" not in good
    assert len(world.ledger) == 1


def test_a_dry_run_neither_commits_nor_records_the_key() -> None:
    world = make_world("native")
    ack = deliver(world, "billing_create_charge", CHARGE, dry_run=True)
    assert ack["ok"] and world.ledger == []
    assert deliver(world, "billing_list_charges", {})["items"] == []
    real = deliver(world, "billing_create_charge", CHARGE)
    assert real == ack  # same id: the dry run left no trace, not even in id minting
    assert len(world.ledger) == 1


@pytest.mark.parametrize("retry_first", [True, False])
def test_late_original_and_keyed_retry_commit_once_in_either_order(retry_first: bool) -> None:
    """Check-and-record is atomic at arrival: whichever copy lands first acts, the other is a
    no-op (the paper's Proposition 2)."""
    world = make_world("native")
    original = request(world, "billing_create_charge", CHARGE, attempt="original")
    retry = request(world, "billing_create_charge", CHARGE, attempt="reissue-1")
    order = [retry, original] if retry_first else [original, retry]
    world.env.run(until=40)
    first = world.endpoint.deliver(order[0])
    world.env.run(until=130)
    second = world.endpoint.deliver(order[1])
    assert second == {**first, "idempotent_replayed": True}
    assert [(e["attempt"], e["t"]) for e in world.ledger] == [(order[0].attempt, 40.0)]


def test_mastodon_late_original_after_the_key_expired_executes_again() -> None:
    """The one-hour mastodon window is a hazard kept on purpose."""
    world = make_world("native")
    args = {"platform": "mastodon", "text": "hello", KEY_FIELD: "p"}
    deliver(world, "social_publish", args, when=30, attempt="reissue-1")
    deliver(world, "social_publish", args, when=30 + 3700, attempt="original")
    assert [e["attempt"] for e in world.ledger] == ["reissue-1", "original"]
