"""Tickets: create and comment are not idempotent, update_status is conditional (409 with the
current status), list_recent is strong and search lags 120 s."""

from __future__ import annotations

from support.worlds import deliver, make_world

NEW = {"title": "Disk full on db-3", "body": "Alerts since 09:10", "priority": "high"}


def test_create_twice_opens_two_tickets() -> None:
    world = make_world("native")
    a, b = deliver(world, "tickets_create", NEW), deliver(world, "tickets_create", NEW)
    assert a["ticket_id"] != b["ticket_id"]
    assert len(world.ledger) == 2
    assert world.ledger[0]["write_class"] == {"idempotency": "none", "read_path": "strong",
                                              "reversibility": "reversible"}


def test_comment_twice_adds_two_comments() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW)["ticket_id"]
    deliver(world, "tickets_add_comment", {"ticket_id": t, "body": "looking"})
    deliver(world, "tickets_add_comment", {"ticket_id": t, "body": "looking"})
    items = deliver(world, "tickets_list_recent", {"limit": 1})["items"]
    assert [c["body"] for c in items[0]["comments"]] == ["looking", "looking"]
    assert [e["op"] for e in world.ledger] == ["create", "add_comment", "add_comment"]


def test_comment_on_unknown_ticket_is_404() -> None:
    world = make_world("native")
    got = deliver(world, "tickets_add_comment", {"ticket_id": "T_nope", "body": "x"})
    assert got["error"]["kind"] == "not_found" and world.ledger == []


def test_update_status_commits_when_expected_matches() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW)["ticket_id"]
    got = deliver(world, "tickets_update_status",
                  {"ticket_id": t, "status": "resolved", "expected_status": "open"})
    assert got == {"ok": True, "ticket_id": t, "status": "resolved"}
    assert world.ledger[-1]["write_class"]["idempotency"] == "conditional"
    assert world.ledger[-1]["reverses"] is None


def test_update_status_409_carries_current_status_and_commits_nothing() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW)["ticket_id"]
    args = {"ticket_id": t, "status": "resolved", "expected_status": "open"}
    deliver(world, "tickets_update_status", args)
    again = deliver(world, "tickets_update_status", args)
    assert again["ok"] is False
    assert again["error"]["kind"] == "conflict" and again["error"]["status"] == 409
    assert again["error"]["current_status"] == "resolved"
    assert [e["op"] for e in world.ledger] == ["create", "update_status"]


def test_status_revert_and_close_are_compensating() -> None:
    """Back to an earlier status reverts a change; closing a ticket undoes its creation."""
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW)["ticket_id"]
    deliver(world, "tickets_update_status", {"ticket_id": t, "status": "pending",
                                             "expected_status": "open"})
    deliver(world, "tickets_update_status", {"ticket_id": t, "status": "open",
                                             "expected_status": "pending"})
    deliver(world, "tickets_update_status", {"ticket_id": t, "status": "closed",
                                             "expected_status": "open"})
    assert [e["reverses"] for e in world.ledger] == [None, None, t, t]


def test_list_recent_is_strong_and_hides_internal_fields() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW, when=50)["ticket_id"]
    deliver(world, "tickets_update_status", {"ticket_id": t, "status": "pending",
                                             "expected_status": "open"})
    top = deliver(world, "tickets_list_recent", {"limit": 5})["items"][0]
    assert top["ticket_id"] == t and top["status"] == "pending"
    assert not any(k.startswith("_") for k in top)


def test_search_lags_120_s_for_new_tickets() -> None:
    world = make_world("native")
    deliver(world, "tickets_create", {**NEW, "title": "Zebra outage"}, when=100)
    early = deliver(world, "tickets_search", {"query": "zebra"}, when=100 + 120 - 1)
    late = deliver(world, "tickets_search", {"query": "zebra"}, when=100 + 120 + 1)
    assert early["items"] == []
    assert [i["title"] for i in late["items"]] == ["Zebra outage"]


def test_search_lags_120_s_for_comments() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW, when=10)["ticket_id"]
    deliver(world, "tickets_add_comment", {"ticket_id": t, "body": "quokka found"}, when=500)
    assert deliver(world, "tickets_search", {"query": "quokka"}, when=500 + 119)["items"] == []
    assert len(deliver(world, "tickets_search", {"query": "quokka"}, when=500 + 121)["items"]) == 1
    # the strong list shows the comment at once
    assert deliver(world, "tickets_list_recent", {})["items"][0]["comments"][0]["body"] == "quokka found"


def test_stale_view_hides_a_later_comment() -> None:
    world = make_world("native")
    t = deliver(world, "tickets_create", NEW, when=10)["ticket_id"]
    deliver(world, "tickets_add_comment", {"ticket_id": t, "body": "late"}, when=40)
    stale = deliver(world, "tickets_list_recent", {}, when=60, stale_as_of=20.0)
    assert stale["items"][0]["ticket_id"] == t and stale["items"][0]["comments"] == []
