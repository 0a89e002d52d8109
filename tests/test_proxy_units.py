"""The proxy's parts on their own: the fault plan's seeded draws, the ledger's reading of the
upstream's answers (replays, batches, duplicates by business key), the shapes of MCP results,
the journal's tolerance of a torn last line, and redaction. (The stdio channel's are in
test_proxy_channel.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support.proxy_runs import WORLD

from limbo.base.errors import UsageError
from limbo.base.rng import generator
from limbo.faults import tail
from limbo.proxy import journal as journal_module
from limbo.proxy.declared import load
from limbo.proxy.journal import Journal, read_journal
from limbo.proxy.ledger import COMMITTED, REPLAYED, UNCERTAIN, Ledger
from limbo.proxy.plan import parse
from limbo.proxy.redact import redact, scrub_with
from limbo.proxy.session import Session
from limbo.proxy.shapes import items, object_id, payload, result_of
from limbo.proxy.upstream import Upstream, UpstreamSpec

CATALOG = load(WORLD)
CATALOG.bind(["create_order", "refund_order", "add_lines", "list_orders", "list_lines"])
WRITES = ["orders_create_order", "orders_refund_order", "orders_add_lines"]


def test_a_seed_names_one_fault_plan() -> None:
    a = parse("timeout_late_tail", CATALOG, WRITES, seed=7, scale=1.0)
    b = parse("timeout_late_tail", CATALOG, WRITES, seed=7, scale=1.0)
    assert a.focal == b.focal and a.fault is b.fault
    assert tail.draw(a.rng("fault")) == tail.draw(generator(7, "proxy:fault"))  # the act's draws
    focals = {parse("timeout_post", CATALOG, WRITES, seed=s, scale=1.0).focal
              for s in range(40)}
    assert focals == set(WRITES)  # drawn among the task's writes
    batch = parse("partial_batch", CATALOG, WRITES, seed=3, scale=0.5)
    assert batch.focal == "orders_add_lines" and batch.client_timeout_s == 15.0
    named = parse("phantom_success@create_order", CATALOG, WRITES, seed=0, scale=1.0)
    assert named.focal == "orders_create_order" and len(named.phantom_id()) == 12


def test_a_plan_the_world_cannot_carry_is_refused() -> None:
    with pytest.raises(UsageError, match="needs the shape of orders_refund_order"):
        parse("phantom_success@orders_refund_order", CATALOG, WRITES, 0, 1.0)
    with pytest.raises(UsageError, match="no write of the task can carry it"):
        parse("partial_batch", CATALOG, ["orders_create_order"], 0, 1.0)


def _ledger() -> Ledger:
    return Ledger(CATALOG)


def _write(ledger: Ledger, n: int, tool: str, args: dict, key: str | None = None) -> None:
    ledger.apply({"type": "intent", "n": n, "t": float(n), "tool": tool, "args": args,
                  "key": key, "attempt": "original", "request_id": f"r{n}"})


ORDER = {"customer_id": "c1", "sku": "MUG-01", "quantity": 2}


def _answer(**body: object) -> dict:
    return {"ok": True, **body}


def test_the_ledger_tells_a_commit_from_a_replay_and_a_failure() -> None:
    ledger = _ledger()
    cases = [
        (ORDER, "k1", _answer(order_id="ord_1"), COMMITTED),
        (ORDER, "k1", _answer(order_id="ord_1"), REPLAYED),  # the same id again
        (ORDER, None, _answer(order_id="ord_2"), COMMITTED),  # a second order: a duplicate
        (ORDER, "k1", _answer(order_id="ord_9"), COMMITTED),  # a new id: the key misdeclared
        (ORDER, "k1", {"ok": True, "text": "placed"}, UNCERTAIN),  # no id: reconciliation's
        (ORDER, None, _answer(order_id="ord_3", idempotent_replayed=True), REPLAYED),
        (ORDER, None, {"ok": False, "error": "boom"}, UNCERTAIN),
    ]
    for n, (args, key, answer, state) in enumerate(cases, start=1):
        _write(ledger, n, "orders_create_order", args, key)
        entry = ledger.ack_entry(n, n + 0.5, answer)
        ledger.apply(entry)
        assert entry["state"] == state, (n, entry)
    entries = ledger.entries()
    assert [e["object_id"] for e in entries] == ["ord_1", "ord_2", "ord_9"]
    assert [e["args"] for e in entries] == [ORDER, ORDER, ORDER]
    assert [(w["request_id"], w["declared"]) for w in ledger.contradicted()] == [
        ("r4", 'key = "honoured"')]
    assert entries[0]["write_class"] == {"idempotency": "keyed", "read_path": "strong",
                                         "reversibility": "reversible"}
    assert ledger.duplicates() == {
        'orders_create_order {"customer_id": "c1", "sku": "MUG-01", "quantity": 2}': 2}
    assert [w.n for w in ledger.uncertain()] == [5, 7]


def test_a_batch_commits_one_effect_per_unit_and_a_refund_reverses() -> None:
    ledger = _ledger()
    lines = [{"sku": "A", "note": "1"}, {"sku": "B", "note": "2"}]
    _write(ledger, 1, "orders_add_lines", {"order_id": "o1", "lines": lines})
    ledger.apply(ledger.ack_entry(1, 1.5, _answer(order_id="o1", line_ids=["l1", "l2"])))
    _write(ledger, 2, "orders_refund_order", {"order_id": "o1"})
    ledger.apply(ledger.ack_entry(2, 2.5, _answer(order_id="o1", status="refunded")))
    entries = ledger.entries()
    assert [(e["tool"], e["args"], e["object_id"], e["reverses"]) for e in entries] == [
        ("orders_add_lines", {"order_id": "o1", "line": lines[0]}, "l1", None),
        ("orders_add_lines", {"order_id": "o1", "line": lines[1]}, "l2", None),
        ("orders_refund_order", {"order_id": "o1"}, "o1", "o1"),
    ]
    assert [e["seq"] for e in entries] == [0, 1, 2]


@pytest.mark.parametrize(("result", "ok", "listed"), [
    ({"content": [{"type": "text", "text": '{"orders": [{"order_id": "a"}]}'}]}, True,
     [{"order_id": "a"}]),
    ({"content": [], "structuredContent": {"data": {"rows": [{"x": 1}]}}}, True, [{"x": 1}]),
    ({"content": [{"type": "text", "text": '[{"x": 2}]'}]}, True, [{"x": 2}]),
    ({"content": [{"type": "text", "text": "not json"}], "isError": True}, False, []),
    ({"content": [{"type": "image", "data": "..."}]}, True, []),
])
def test_results_of_every_shape_are_read(result: dict, ok: bool, listed: list) -> None:
    body = payload(result)
    assert body["ok"] is ok and items(body) == listed


def test_an_id_is_found_at_the_top_or_one_object_down() -> None:
    assert object_id({"order_id": "a"}, "order_id") == "a"
    assert object_id({"order": {"order_id": 7}}, "order_id") == "7"
    assert object_id({"order_id": True}, "order_id") is None
    assert object_id({"x": 1}, "order_id") is None and object_id({"x": 1}, None) is None
    assert payload(result_of({"ok": False, "error": {"kind": "timeout"}}, True))["ok"] is False


def test_a_torn_last_journal_line_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path, lambda s: s)
    journal.write({"type": "intent", "n": 1}, sync=True)
    journal.close()
    with path.open("ab") as fh:
        fh.write(b'{"type": "ack", "n"')  # killed mid-write
    assert read_journal(path) == [{"type": "intent", "n": 1}]
    with pytest.raises(UsageError, match="File exists"):
        Journal(path, lambda s: s)  # one journal per episode: never overwritten
    path.write_bytes(b"garbage\n")
    with pytest.raises(UsageError, match="line 1 is not a journal entry"):
        read_journal(path)


def test_a_write_is_on_disk_before_it_is_forwarded_and_its_answer_rides_the_next_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "j.jsonl"
    synced: list[int] = []
    """The journal's length at each sync."""
    real = journal_module._DATASYNC

    def datasync(fd: int) -> None:
        real(fd)
        synced.append(path.stat().st_size)

    monkeypatch.setattr(journal_module, "_DATASYNC", datasync)
    seen: list[tuple[int, int, str]] = []
    """What the upstream found when each write reached it: the length last synced, the
    journal's length, the type of its last line."""

    class Orders(Upstream):
        async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
            seen.append((synced[-1] if synced else 0, path.stat().st_size, read_journal(path)[-1]["type"]))
            return result_of({"order_id": f"o{len(seen)}", **args})

    session = Session(CATALOG, Orders(UpstreamSpec()), parse("none", CATALOG, WRITES, 0, 1.0),
                      Journal(path, lambda s: s))

    async def agent() -> None:
        for i in range(3):
            await session.call("create_order", {**ORDER, "customer_id": f"c{i}"}, f"call{i}")

    asyncio.run(agent())
    assert [last for _, _, last in seen] == ["intent"] * 3
    assert all(on_disk == length for on_disk, length, _ in seen)  # synced up to the intent
    assert len(synced) == 3  # one sync per write; each answer went to disk with the next one
    types = [e["type"] for e in read_journal(path)]
    assert types.count("ack") == 3 and types.index("ack") < types.index("intent", 2)
    session.journal.close()
    assert synced[-1] == path.stat().st_size  # the last answer: synced at the end


def test_credentials_are_masked_but_effect_fields_kept() -> None:
    args = {"password": "p", "api_key": "k", "nested": {"authToken": "t"}, "sku": "s",
            "token": "kept-as-effect"}
    assert redact(args, keep=("token",)) == {"password": "***", "api_key": "***",
                                             "nested": {"authToken": "***"}, "sku": "s",
                                             "token": "kept-as-effect"}
    scrub = scrub_with(["Bearer abcdefgh12345678"])
    assert scrub("x Bearer abcdefgh12345678 y abcdefgh12345678") == "x *** y ***"
