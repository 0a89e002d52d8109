"""Data: insert assigns ids (a repeat is a second row), insert_many is non-atomic (rows commit
one by one and a cut leaves a prefix), upsert is idempotent by key; queries are strong."""

from __future__ import annotations

import pytest
from support.worlds import deliver, make_world

ROWS = [{"email": f"lead{i}@example.net", "n": i} for i in range(6)]
BATCH = {"table": "leads", "rows": ROWS}


def _stored(world, table: str = "leads") -> list[dict]:
    items = deliver(world, "data_query", {"table": table})["items"]
    return [{k: v for k, v in r.items() if k != "id"} for r in items]


def test_insert_twice_is_two_rows() -> None:
    world = make_world("native")
    a = deliver(world, "data_insert", {"table": "t", "row": {"a": 1}})
    b = deliver(world, "data_insert", {"table": "t", "row": {"a": 1}})
    assert a["id"] != b["id"]
    assert _stored(world, "t") == [{"a": 1}, {"a": 1}]
    assert world.ledger[0]["write_class"] == {"idempotency": "none", "read_path": "strong",
                                              "reversibility": "reversible"}


def test_insert_many_commits_every_row_in_order() -> None:
    world = make_world("native")
    got = deliver(world, "data_insert_many", BATCH)
    assert got["ok"] and got["inserted"] == 6 and len(got["ids"]) == 6
    assert [e["args"]["row"] for e in world.ledger] == ROWS
    assert [e["object_id"] for e in world.ledger] == got["ids"]
    assert _stored(world) == ROWS


@pytest.mark.parametrize("k", range(0, 6))
def test_insert_many_cut_after_k_leaves_exactly_the_first_k_rows(k: int) -> None:
    world = make_world("native")
    got = deliver(world, "data_insert_many", BATCH, cut_after=k)
    assert got["ok"] is False and got["error"]["kind"] == "server_error"
    assert [e["args"]["row"] for e in world.ledger] == ROWS[:k]
    assert _stored(world) == ROWS[:k]


def test_unkeyed_reinsert_after_a_cut_duplicates_the_prefix() -> None:
    world = make_world("native")
    deliver(world, "data_insert_many", BATCH, cut_after=2)
    deliver(world, "data_insert_many", BATCH)
    assert _stored(world) == ROWS[:2] + ROWS


def test_keyed_retry_after_a_partial_batch_commits_only_the_missing_rows() -> None:
    world = make_world("keys-everywhere")
    keyed = {**BATCH, "idempotency_key": "b1"}
    deliver(world, "data_insert_many", keyed, when=10, cut_after=3)
    assert len(world.ledger) == 3
    retry = deliver(world, "data_insert_many", keyed, when=60)
    assert retry["ok"] and "idempotent_replayed" not in retry
    assert retry["inserted"] == 6 and len(retry["ids"]) == 6
    assert retry["ids"][:3] == [e["object_id"] for e in world.ledger[:3]]
    assert [e["args"]["row"] for e in world.ledger] == ROWS
    assert [e["t"] for e in world.ledger] == [10.0] * 3 + [60.0] * 3
    assert _stored(world) == ROWS
    # the whole batch is now recorded: a further repeat replays it
    assert deliver(world, "data_insert_many", keyed) == {**retry, "idempotent_replayed": True}
    assert len(world.ledger) == 6


def test_keyed_retry_cut_twice_still_completes_exactly_once() -> None:
    world = make_world("keys-everywhere")
    keyed = {**BATCH, "idempotency_key": "b1"}
    deliver(world, "data_insert_many", keyed, cut_after=2)
    deliver(world, "data_insert_many", keyed, cut_after=2)
    done = deliver(world, "data_insert_many", keyed)
    assert done["ok"] and len(done["ids"]) == 6
    assert _stored(world) == ROWS


def test_keyed_retry_with_only_the_missing_rows_is_a_mismatch() -> None:
    """The key belongs to the whole batch: sending a different set of rows under it is 422."""
    world = make_world("keys-everywhere")
    deliver(world, "data_insert_many", {**BATCH, "idempotency_key": "b1"}, cut_after=3)
    got = deliver(world, "data_insert_many",
                  {"table": "leads", "rows": ROWS[3:], "idempotency_key": "b1"})
    assert got["error"]["kind"] == "idempotency_mismatch"
    assert len(world.ledger) == 3


def test_upsert_repeat_commits_nothing() -> None:
    world = make_world("native")
    args = {"table": "profiles", "key": "acct-42", "row": {"name": "Globex", "tier": "gold"}}
    first, again = deliver(world, "data_upsert", args), deliver(world, "data_upsert", args)
    assert first == {"ok": True, "id": first["id"], "changed": True}
    assert again == {"ok": True, "id": first["id"], "changed": False}
    assert len(world.ledger) == 1
    assert world.ledger[0]["write_class"]["idempotency"] == "natural"


def test_upsert_replaces_the_row_with_the_same_key() -> None:
    world = make_world("native")
    base = {"table": "profiles", "key": "acct-42"}
    a = deliver(world, "data_upsert", {**base, "row": {"tier": "bronze"}})
    b = deliver(world, "data_upsert", {**base, "row": {"tier": "gold"}})
    other = deliver(world, "data_upsert", {**base, "key": "acct-43", "row": {"tier": "gold"}})
    assert a["id"] == b["id"] != other["id"]
    assert _stored(world, "profiles") == [{"tier": "gold"}, {"tier": "gold"}]
    assert len(world.ledger) == 3


def test_query_filters_by_table_and_where() -> None:
    world = make_world("native")
    deliver(world, "data_insert", {"table": "a", "row": {"x": 1, "y": "p"}})
    deliver(world, "data_insert", {"table": "a", "row": {"x": 2, "y": "p"}})
    deliver(world, "data_insert", {"table": "b", "row": {"x": 1, "y": "p"}})
    got = deliver(world, "data_query", {"table": "a", "where": {"y": "p", "x": 2}})["items"]
    assert [r["x"] for r in got] == [2]
    assert not any(k.startswith("_") for r in got for k in r)


def test_stale_view_hides_later_rows() -> None:
    world = make_world("native")
    deliver(world, "data_insert", {"table": "t", "row": {"a": 1}}, when=10)
    deliver(world, "data_insert", {"table": "t", "row": {"a": 2}}, when=20)
    stale = deliver(world, "data_query", {"table": "t"}, when=30, stale_as_of=15.0)
    assert [r["a"] for r in stale["items"]] == [1]
