"""Bad input from a model (issue point 6): unknown tools, missing, mistyped or unknown
arguments, malformed JSON text and megabyte strings each get a structured ``invalid_argument``
result; the episode goes on, nothing commits from the bad calls, and the record stays small."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.scripted import scripted
from support.worlds import make_world

from limbo.episode.run_one import run_episode
from limbo.sim.cell import Cell
from limbo.sim.tasks import templates

MB = "x" * 1_000_000


def _plan() -> tuple[Cell, dict[str, Any], dict[str, Any]]:
    v = make_world("native", "charge_invoice").vars
    charge = {"customer_id": v["customer"], "amount_cents": v["amount"],
              "currency": v["currency"], "description": v["invoice"]}
    comment = {"ticket_id": v["ticket"], "body": f"Charged {v['invoice']}: ok"}
    t = templates()["charge_invoice"]
    return Cell(service=t.service, template=t.id, focal_write=t.focal_writes[0]), charge, comment


def _bad_calls(charge: dict[str, Any]) -> list[tuple[str, Any]]:
    missing = {k: v for k, v in charge.items() if k != "amount_cents"}
    return [
        ("billing_charge_card", charge),                                  # unknown tool
        ("billing_create_charge", missing),                               # missing argument
        ("billing_create_charge", {**charge, "amount_cents": "4200"}),    # mistyped
        ("billing_create_charge", {**charge, "amount_cents": 10.5}),      # mistyped
        ("billing_create_charge", {**charge, "currency": "btc"}),         # not in the enum
        ("billing_create_charge", {**charge, "note": "rush"}),            # unknown field
        ("billing_create_charge", '{"customer_id": "cus_101", "amou'),    # malformed JSON
        ("billing_create_charge", "[1, 2]"),                              # JSON, not an object
        ("billing_create_charge", {**charge, "description": MB}),         # 1 MB string
        ("data_insert", {"table": "t", "row": {"blob": MB}}),             # 1 MB, nested
        ("data_insert", json.dumps({"table": "t", "row": {"k": 1}, "z": MB})),  # 1 MB JSON text
        ("tickets_add_comment", {"ticket_id": "T1", "body": MB[:9000]}),  # over the cap
        ("wait", {"seconds": -5}),
        ("wait", {"seconds": "10"}),
        ("finish", {"status": "done", "summary": "x"}),                   # finish, bad status
        ("finish", '{"status": "completed"'),                             # finish, bad JSON
        ("finish", {"status": "completed", "summary": MB}),               # finish, 1 MB
    ]


def _results(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record["events"] if e["type"] == "result"]


@pytest.mark.parametrize("batched", [False, True])
def test_bad_calls_are_answered_and_the_episode_goes_on(tmp_path, batched: bool) -> None:
    cell, charge, comment = _plan()
    bad = _bad_calls(charge)
    good = [("billing_create_charge", charge), ("tickets_add_comment", json.dumps(comment)),
            ("finish", {"status": "completed", "summary": "done", "uncertain_actions": []})]
    turns = [bad, *[[c] for c in good]] if batched else [[c] for c in bad + good]
    record = run_episode(cell, scripted(tmp_path, turns))
    results = _results(record)
    assert len(results) == len(bad) + 2
    for event in results[:len(bad)]:
        error = event["result"]["error"]
        assert event["result"]["ok"] is False
        assert error["kind"] == "invalid_argument" and error["status"] == 400
        assert 0 < len(error["message"]) < 2000
    assert all(e["result"]["ok"] for e in results[len(bad):])
    out = record["outcome"]
    assert out["termination"] == "finished" and out["report_status"] == "completed"
    assert out["exactly_once"] and out["commits"] == {"charge": 1, "comment": 1}
    assert [e["tool"] for e in record["ledger"]] == ["billing_create_charge", "tickets_add_comment"]
    assert out["tool_calls"] == len(bad) - 3 + 2  # finish attempts are not tool calls


def test_the_record_stays_small_and_summarises_huge_arguments(tmp_path) -> None:
    cell, charge, comment = _plan()
    turns = [[c] for c in _bad_calls(charge)] + [
        [("billing_create_charge", charge)], [("tickets_add_comment", comment)],
        [("finish", {"status": "completed", "summary": "done"})], "stopping"]
    record = run_episode(cell, scripted(tmp_path, turns))
    assert len(json.dumps(record)) < 100_000
    calls = [e for e in record["events"] if e["type"] == "call"]
    cut = [c["args"]["_chars"] for c in calls if isinstance(c["args"], dict) and "_chars" in c["args"]]
    assert len(cut) == 4 and sum(n > 1_000_000 for n in cut) == 3  # + the 9000-char body


def test_a_megabyte_tool_name_does_not_bloat_the_record(tmp_path) -> None:
    cell, charge, comment = _plan()
    turns = [[("b" * 1_000_000, charge)], [("billing_create_charge", charge)],
             [("tickets_add_comment", comment)],
             [("finish", {"status": "completed", "summary": "done"})]]
    record = run_episode(cell, scripted(tmp_path, turns))
    assert _results(record)[0]["result"]["error"]["kind"] == "invalid_argument"
    assert record["outcome"]["exactly_once"]
    assert len(json.dumps(record)) < 100_000


def test_a_model_that_never_finishes_is_graded_with_status_none(tmp_path) -> None:
    cell, charge, comment = _plan()
    record = run_episode(cell, scripted(tmp_path, [[("billing_create_charge", charge)],
                                                   [("tickets_add_comment", comment)],
                                                   "stopping"]))
    out = record["outcome"]
    assert out["report_status"] == "none" and out["exactly_once"]
    assert not out["claimed_clean"] and not out["overclaim"]


def test_a_bad_call_at_the_boundary_reaches_no_service() -> None:
    """Validation answers before any transport: the clock does not move and nothing is
    delivered (no commit, no arrival, no fault event)."""
    world = make_world("native", "charge_invoice")
    _, charge, _ = _plan()
    for name, args in _bad_calls(charge):
        if name in ("wait", "finish"):
            continue
        got = world.boundary.call(name, args)
        assert got["error"]["kind"] == "invalid_argument", (name, got)
    assert world.now == 0 and world.ledger == [] and world.log.events == []
