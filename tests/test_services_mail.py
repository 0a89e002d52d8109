"""Mail: send is neither idempotent nor reversible, and sent-mail search lags 120 s."""

from __future__ import annotations

from support.worlds import deliver, make_world

MAIL = {"to": "jo@example.com", "subject": "Receipt R-058", "body": "Thanks for your payment."}


def test_send_twice_sends_two_messages() -> None:
    world = make_world("native")
    a, b = deliver(world, "mail_send", MAIL), deliver(world, "mail_send", MAIL)
    assert a["message_id"] != b["message_id"]
    assert len(world.ledger) == 2
    assert world.ledger[0]["write_class"] == {"idempotency": "none", "read_path": "eventual",
                                              "reversibility": "irreversible"}


def test_keys_everywhere_send_honours_the_key() -> None:
    world = make_world("keys-everywhere")
    first = deliver(world, "mail_send", {**MAIL, "idempotency_key": "m1"})
    again = deliver(world, "mail_send", {**MAIL, "idempotency_key": "m1"}, when=3000)
    assert again == {**first, "idempotent_replayed": True}
    assert len(world.ledger) == 1
    assert world.ledger[0]["write_class"]["idempotency"] == "keyed"


def test_search_sent_lags_120_s() -> None:
    world = make_world("native")
    deliver(world, "mail_send", MAIL, when=200)
    query = {"query": "R-058"}
    assert deliver(world, "mail_search_sent", query, when=200 + 120 - 1)["items"] == []
    late = deliver(world, "mail_search_sent", query, when=200 + 120 + 1)
    assert [m["subject"] for m in late["items"]] == ["Receipt R-058"]


def test_search_sent_matches_subject_or_body_case_insensitively() -> None:
    world = make_world("native")
    deliver(world, "mail_send", MAIL, when=1)
    deliver(world, "mail_send", {**MAIL, "subject": "Other", "body": "payment RECEIVED"})
    assert len(deliver(world, "mail_search_sent", {"query": "receipt"}, when=500)["items"]) == 1
    got = deliver(world, "mail_search_sent", {"query": "PAYMENT"})["items"]
    assert [m["subject"] for m in got] == ["Other", "Receipt R-058"]  # newest first


def test_stale_view_hides_later_mail() -> None:
    world = make_world("native")
    deliver(world, "mail_send", MAIL, when=10)
    deliver(world, "mail_send", {**MAIL, "subject": "Receipt R-059"}, when=20)
    stale = deliver(world, "mail_search_sent", {"query": "Receipt"}, when=1000, stale_as_of=15.0)
    assert [m["subject"] for m in stale["items"]] == ["Receipt R-058"]
