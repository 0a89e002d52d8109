"""Social: mastodon honours keys (1 h in the native contract), the other platforms ignore them;
weibo's listing lags 180 s, x has no read path, delete is a reversible cleanup."""

from __future__ import annotations

import pytest
from support.worlds import deliver, make_world

POST = {"platform": "mastodon", "text": "Lumen v1 is out"}


def test_mastodon_key_replays_first_response_and_commits_nothing_new() -> None:
    world = make_world("native")
    first = deliver(world, "social_publish", {**POST, "idempotency_key": "k1"}, when=10)
    again = deliver(world, "social_publish", {**POST, "idempotency_key": "k1"}, when=50)
    assert first["ok"] and "idempotent_replayed" not in first
    assert again == {**first, "idempotent_replayed": True}
    assert len(world.ledger) == 1
    assert world.ledger[0]["key"] == "k1"
    assert world.ledger[0]["write_class"]["idempotency"] == "keyed"
    assert [e["type"] for e in world.log.events].count("replay") == 1


def test_mastodon_key_with_other_text_is_422_and_nothing_executes() -> None:
    world = make_world("native")
    deliver(world, "social_publish", {**POST, "idempotency_key": "k1"})
    other = deliver(world, "social_publish", {**POST, "text": "other", "idempotency_key": "k1"})
    assert other["error"]["kind"] == "idempotency_mismatch"
    assert other["error"]["status"] == 422
    assert len(world.ledger) == 1
    assert len(world.services["social"].posts._rows) == 1


@pytest.mark.parametrize("platform", ["weibo", "linkedin", "x"])
def test_native_key_is_ignored_off_mastodon(platform: str) -> None:
    world = make_world("native")
    args = {"platform": platform, "text": "same", "idempotency_key": "k1"}
    first, second = deliver(world, "social_publish", args), deliver(world, "social_publish", args)
    assert first["ok"] and second["ok"] and "idempotent_replayed" not in second
    assert first["post_id"] != second["post_id"]
    assert len(world.ledger) == 2
    assert all(e["key"] is None for e in world.ledger)  # the service never saw a key
    assert world.ledger[0]["write_class"]["idempotency"] == "none"


def test_keys_everywhere_honours_the_key_on_weibo() -> None:
    world = make_world("keys-everywhere")
    args = {"platform": "weibo", "text": "same", "idempotency_key": "k1"}
    deliver(world, "social_publish", args)
    assert deliver(world, "social_publish", args)["idempotent_replayed"] is True
    assert len(world.ledger) == 1
    assert world.ledger[0]["write_class"]["idempotency"] == "keyed"


@pytest.mark.parametrize(("contract", "ttl"), [("native", 3600.0), ("keys-everywhere", 86400.0)])
def test_mastodon_key_retention(contract: str, ttl: float) -> None:
    """Native mastodon forgets a key after one hour (as the real server does); keys-everywhere
    keeps it 24 h. A repeat inside the window replays, one after it executes again."""
    world = make_world(contract)
    args = {**POST, "idempotency_key": "k1"}
    deliver(world, "social_publish", args, when=100)
    assert deliver(world, "social_publish", args, when=100 + ttl - 1)["idempotent_replayed"]
    assert len(world.ledger) == 1
    late = deliver(world, "social_publish", args, when=100 + ttl + 1)
    assert late["ok"] and "idempotent_replayed" not in late
    assert len(world.ledger) == 2


def test_weibo_listing_lags_180_s() -> None:
    world = make_world("native")
    deliver(world, "social_publish", {"platform": "weibo", "text": "晚安"}, when=1000)
    listing = {"platform": "weibo", "limit": 10}
    early = deliver(world, "social_list_posts", listing, when=1000 + 180 - 1)
    late = deliver(world, "social_list_posts", listing, when=1000 + 180 + 1)
    assert early == {"ok": True, "items": []}
    assert [p["text"] for p in late["items"]] == ["晚安"]


@pytest.mark.parametrize("platform", ["mastodon", "linkedin"])
def test_strong_platforms_show_a_post_at_once(platform: str) -> None:
    world = make_world("native")
    deliver(world, "social_publish", {"platform": platform, "text": "one"}, when=5)
    deliver(world, "social_publish", {"platform": platform, "text": "two"})
    got = deliver(world, "social_list_posts", {"platform": platform, "limit": 10})
    assert [p["text"] for p in got["items"]] == ["two", "one"]  # newest first


def test_list_posts_filters_by_platform_and_limit() -> None:
    world = make_world("native")
    for i in range(3):
        deliver(world, "social_publish", {"platform": "mastodon", "text": f"m{i}"})
    deliver(world, "social_publish", {"platform": "linkedin", "text": "l"})
    got = deliver(world, "social_list_posts", {"platform": "mastodon", "limit": 2})
    assert [p["text"] for p in got["items"]] == ["m2", "m1"]


def test_x_has_no_read_path() -> None:
    world = make_world("native")
    deliver(world, "social_publish", {"platform": "x", "text": "status"})
    got = deliver(world, "social_list_posts", {"platform": "x", "limit": 10}, when=5000)
    assert got["ok"] is False
    assert got["error"]["kind"] == "not_available"
    assert world.ledger[0]["write_class"]["read_path"] == "none"


@pytest.mark.parametrize(("platform", "path"),
                         [("mastodon", "strong"), ("linkedin", "strong"), ("weibo", "eventual")])
def test_publish_write_class_read_path(platform: str, path: str) -> None:
    world = make_world("native")
    deliver(world, "social_publish", {"platform": platform, "text": "t"})
    assert world.ledger[0]["write_class"] == {
        "idempotency": "keyed" if platform == "mastodon" else "none",
        "read_path": path, "reversibility": "reversible"}


def test_delete_reverses_the_post_and_a_repeat_is_404_without_effect() -> None:
    world = make_world("native")
    post = deliver(world, "social_publish", {"platform": "linkedin", "text": "oops"})
    args = {"platform": "linkedin", "post_id": post["post_id"]}
    assert deliver(world, "social_delete_post", args)["ok"]
    again = deliver(world, "social_delete_post", args)
    assert again["error"]["kind"] == "not_found" and again["error"]["status"] == 404
    assert [e["op"] for e in world.ledger] == ["publish", "delete_post"]
    assert world.ledger[1]["reverses"] == post["post_id"]
    assert deliver(world, "social_list_posts", {"platform": "linkedin"})["items"] == []


def test_delete_on_the_wrong_platform_is_404() -> None:
    world = make_world("native")
    post = deliver(world, "social_publish", {"platform": "linkedin", "text": "keep"})
    got = deliver(world, "social_delete_post", {"platform": "mastodon", "post_id": post["post_id"]})
    assert got["error"]["kind"] == "not_found"
    assert len(world.ledger) == 1


def test_stale_view_hides_later_posts() -> None:
    world = make_world("native")
    deliver(world, "social_publish", {"platform": "mastodon", "text": "old"}, when=10)
    deliver(world, "social_publish", {"platform": "mastodon", "text": "new"}, when=20)
    stale = deliver(world, "social_list_posts", {"platform": "mastodon"}, when=30, stale_as_of=15.0)
    assert [p["text"] for p in stale["items"]] == ["old"]
