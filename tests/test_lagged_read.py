"""The hidden side of a read that lags: when an eventual or stale read cannot see effects that
have already committed on its service, the log says so (``lagged_read``, with the ledger
seqs it hides), and the timeline shows it next to the agent's empty result."""

from __future__ import annotations

from typing import Any

from support.cells import cell_for

from limbo.episode.run_one import run_episode
from limbo.episode.timeline import describe
from limbo.sim.events import EVENT_TYPES, VISIBLE_TYPES


def _lagged(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record["events"] if e["type"] == "lagged_read"]


def test_an_eventual_read_that_misses_the_timed_out_post_is_shown_with_what_it_hides() -> None:
    record = run_episode(cell_for("announce_weibo", model="policy/verify", fault="timeout_post"))
    (event,) = _lagged(record)
    commit = record["ledger"][0]
    assert event["tool"] == "social_list_posts" and event["hidden"] == [commit["seq"]] == [0]
    assert event["horizon"] < commit["t"] < event["t"]
    assert event["horizon"] == event["t"] - 180.0  # weibo's documented list lag
    # the agent really saw nothing: the read's result is the next event, and it is empty
    after = record["events"][record["events"].index(event) + 1]
    assert after["type"] == "result" and after["result"]["items"] == []
    line = describe(event)
    assert line.startswith("LAGGED READ social_list_posts sees up to t=") and "(hides #0)" in line
    assert "lagged_read" in EVENT_TYPES and "lagged_read" not in VISIBLE_TYPES


def test_a_strong_read_emits_none() -> None:
    record = run_episode(cell_for("announce_mastodon", model="policy/verify", fault="timeout_post"))
    reads = [e for e in record["events"] if e["type"] == "call" and e["tool"] == "social_list_posts"]
    assert reads and record["ledger"]  # it did read back after a commit
    assert _lagged(record) == []


def test_an_eventual_read_with_nothing_to_hide_emits_none() -> None:
    """Keep the log quiet: a lagging read emits only when a commit falls inside its lag."""
    record = run_episode(cell_for("announce_weibo", model="policy/verify", fault="timeout_pre"))
    reads = [e for e in record["events"] if e["type"] == "call" and e["tool"] == "social_list_posts"]
    first_commit = record["ledger"][0]["t"]
    assert reads and reads[0]["t"] < first_commit  # a lagging read while nothing had committed
    assert _lagged(record) == []


def test_a_stale_replica_read_is_shown_too() -> None:
    record = run_episode(cell_for("charge_invoice", model="policy/verify", fault="stale_readback"))
    (event,) = _lagged(record)
    charge = record["ledger"][0]
    assert charge["tool"] == "billing_create_charge" and event["hidden"] == [0]
    assert event["horizon"] < charge["t"]


def test_the_event_is_deterministic() -> None:
    cell = cell_for("announce_weibo", model="policy/verify", fault="timeout_post")
    a, b = run_episode(cell), run_episode(cell)
    a.pop("runtime", None), b.pop("runtime", None)
    assert a == b
