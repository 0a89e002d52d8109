"""Grading invariants (grading.md): reference policies are exactly-once without faults, partial
batches are graded row by row, replays and rejections are not effects, spurious effects and
compensation are told apart, overclaim follows its definition, and a stored record re-grades
to the identical outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.scripted import scripted
from support.worlds import deliver, make_world

from limbo.episode.run_one import run_episode
from limbo.log.grading import assign, grade, matches, regrade, undone
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import fill, templates
from limbo.sim.tools import KEY_FIELD

POLICIES = ("policy/verify", "policy/keyed", "policy/give-up")
CASES = [(t, f, c) for t, tpl in templates().items() for f in tpl.focal_writes for c in CONTRACTS]
CLEAN = {"status": "completed", "summary": "done", "uncertain_actions": []}


def cell(template: str, focal: str | None = None, **kw: Any) -> Cell:
    t = templates()[template]
    return Cell(service=t.service, template=template, focal_write=focal or t.focal_writes[0], **kw)


# --- reference policies under `none` ---------------------------------------------------------

@pytest.mark.parametrize(("template", "focal", "contract"), CASES,
                         ids=[f"{t}-{f}-{c}" for t, f, c in CASES])
def test_reference_policies_are_exactly_once_without_faults(template, focal, contract) -> None:
    for model in POLICIES:
        out = run_episode(cell(template, focal, contract=contract, model=model))["outcome"]
        assert out["termination"] == "finished", (model, out["termination_reason"])
        assert out["exactly_once"] and out["task_success"], (model, out)
        assert set(out["commits"].values()) == {1}
        assert out["spurious"] == 0 and not out["duplicate"] and not out["missing"]
        assert out["report_status"] == "completed" and out["claimed_clean"]
        assert not out["overclaim"]


# --- partial batches -------------------------------------------------------------------------

def _batch_world(contract: str = "native"):
    world = make_world(contract, "import_batch")
    rows = world.vars["rows"]
    comment = {"ticket_id": world.vars["ticket"], "body": f"Imported batch {world.vars['batch']}"}
    return world, rows, comment


@pytest.mark.parametrize("k", [0, 1, 3])
def test_partial_batch_rerun_of_only_the_missing_rows_is_exactly_once(k: int) -> None:
    world, rows, comment = _batch_world()
    assert 5 <= len(rows) <= 10
    deliver(world, "data_insert_many", {"table": "leads", "rows": rows}, cut_after=k)
    deliver(world, "data_insert_many", {"table": "leads", "rows": rows[k:]})
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["exactly_once"] and set(out["commits"].values()) == {1}
    assert not out["overclaim"]


@pytest.mark.parametrize("k", [1, 3])
def test_reinserting_the_whole_batch_duplicates_exactly_the_overlap(k: int) -> None:
    world, rows, comment = _batch_world()
    deliver(world, "data_insert_many", {"table": "leads", "rows": rows}, cut_after=k)
    deliver(world, "data_insert_many", {"table": "leads", "rows": rows})
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["duplicate"] and not out["exactly_once"] and out["task_success"]
    assert [out["commits"][f"rows[{i}]"] for i in range(len(rows))] == \
        [2] * k + [1] * (len(rows) - k)
    assert out["spurious"] == 0 and out["overclaim"]


def test_keyed_retry_of_a_partial_batch_is_exactly_once() -> None:
    world, rows, comment = _batch_world("keys-everywhere")
    batch = {"table": "leads", "rows": rows, KEY_FIELD: "b"}
    deliver(world, "data_insert_many", batch, cut_after=2)
    deliver(world, "data_insert_many", batch)
    deliver(world, "data_insert_many", batch)  # a replay on top
    deliver(world, "tickets_add_comment", comment)
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]


def test_a_cut_batch_with_no_rerun_is_missing_rows() -> None:
    world, rows, comment = _batch_world()
    deliver(world, "data_insert_many", {"table": "leads", "rows": rows}, cut_after=2)
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["missing"] and not out["task_success"] and not out["duplicate"]
    assert sum(out["commits"].values()) == 2 + 1


# --- what is (not) an effect -----------------------------------------------------------------

def _charge_world(contract: str = "native"):
    world = make_world(contract, "charge_invoice")
    v = world.vars
    charge = {"customer_id": v["customer"], "amount_cents": v["amount"],
              "currency": v["currency"], "description": v["invoice"]}
    comment = {"ticket_id": v["ticket"], "body": f"Charged {v['invoice']}: ch_x"}
    return world, charge, comment


def test_replays_and_rejections_never_count_as_effects() -> None:
    world, charge, comment = _charge_world()
    keyed = {**charge, KEY_FIELD: "k"}
    deliver(world, "billing_create_charge", keyed)
    assert deliver(world, "billing_create_charge", keyed)["idempotent_replayed"]
    assert deliver(world, "billing_create_charge", {**keyed, "amount_cents": 1})["ok"] is False
    assert deliver(world, "tickets_add_comment", {**comment, "ticket_id": "T_none"})["ok"] is False
    assert world.boundary.call("tickets_add_comment", {**comment, "extra": 1})["ok"] is False
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["exactly_once"] and out["commits"] == {"charge": 1, "comment": 1}


def test_conflicting_refund_and_status_repeats_are_not_effects() -> None:
    world = make_world("native", "refund_dispute")
    v = world.vars
    mail = {"to": v["email"], "subject": f"Refund for {v['invoice']}", "body": "refunded"}
    for _ in range(3):
        deliver(world, "billing_refund_charge", {"charge_id": v["charge"]})
    deliver(world, "mail_send", mail)
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]

    world = make_world("native", "resolve_ticket")
    v = world.vars
    for _ in range(3):
        deliver(world, "tickets_update_status",
                {"ticket_id": v["ticket"], "status": "resolved", "expected_status": "open"})
    deliver(world, "tickets_add_comment", {"ticket_id": v["ticket"], "body": v["note"]})
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]


def test_an_idempotent_upsert_repeat_is_not_an_effect() -> None:
    world = make_world("native", "sync_profile")
    v = world.vars
    upsert = {"table": "profiles", "key": v["key"], "row": {"name": v["name"], "tier": v["tier"]}}
    deliver(world, "data_upsert", upsert)
    deliver(world, "data_upsert", upsert)
    deliver(world, "tickets_add_comment", {"ticket_id": v["ticket"],
                                           "body": f"Profile {v['key']} synced"})
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]


def test_an_unrelated_effect_is_spurious() -> None:
    world, charge, comment = _charge_world()
    deliver(world, "billing_create_charge", charge)
    deliver(world, "tickets_add_comment", comment)
    deliver(world, "mail_send", {"to": "x@example.com", "subject": "fyi", "body": "b"})
    deliver(world, "billing_create_charge", {**charge, "amount_cents": charge["amount_cents"] + 1})
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["spurious"] == 2 and not out["duplicate"] and out["task_success"]
    assert not out["exactly_once"] and out["overclaim"]


# --- compensation ----------------------------------------------------------------------------

def test_a_refunded_duplicate_charge_is_compensated_and_still_a_duplicate() -> None:
    world, charge, comment = _charge_world()
    deliver(world, "billing_create_charge", charge)
    dup = deliver(world, "billing_create_charge", charge)["charge"]["charge_id"]
    deliver(world, "billing_refund_charge", {"charge_id": dup})
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["duplicate"] and out["compensated"] and out["commits"]["charge"] == 2
    assert out["spurious"] == 0  # the refund is a compensating action
    assert out["task_success"] and not out["missing"]  # the first charge is still in force
    assert not out["exactly_once"] and out["overclaim"]


def test_an_uncompensated_duplicate_is_not_compensated() -> None:
    world, charge, comment = _charge_world()
    deliver(world, "billing_create_charge", charge)
    deliver(world, "billing_create_charge", charge)
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["duplicate"] and not out["compensated"]


def test_a_deleted_duplicate_post_is_compensated() -> None:
    world = make_world("native", "announce_linkedin")
    v = world.vars
    post = {"platform": "linkedin", "text": v["text"]}
    deliver(world, "social_publish", post)
    dup = deliver(world, "social_publish", post)["post_id"]
    deliver(world, "social_delete_post", {"platform": "linkedin", "post_id": dup})
    deliver(world, "mail_send", {"to": v["manager"], "subject": f"Posted: {v['role']} opening",
                                 "body": "live"})
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["duplicate"] and out["compensated"] and out["spurious"] == 0


def test_a_closed_duplicate_ticket_is_compensated() -> None:
    world = make_world("native", "open_incident")
    v = world.vars
    new = {"title": v["title"], "body": v["body"], "priority": v["priority"]}
    first = deliver(world, "tickets_create", new)["ticket_id"]
    dup = deliver(world, "tickets_create", new)["ticket_id"]
    deliver(world, "tickets_update_status",
            {"ticket_id": dup, "status": "closed", "expected_status": "open"})
    deliver(world, "mail_send", {"to": v["oncall"], "subject": f"New incident {first}", "body": "x"})
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["duplicate"] and out["compensated"] and out["spurious"] == 0


# --- effects in force ------------------------------------------------------------------------

def _only_effect_undone(out: dict[str, Any], intent: str) -> None:
    """The intent committed once and was undone: missing, neither TS nor EOS, no duplicate."""
    assert out["commits"][intent] == 1 and out["missing"]
    assert not out["task_success"] and not out["exactly_once"]
    assert not out["duplicate"] and not out["compensated"]
    assert out["spurious"] == 0  # the undoing action is compensating, not spurious
    assert out["overclaim"]


def test_refunding_the_only_charge_leaves_the_intent_missing() -> None:
    world, charge, comment = _charge_world()
    only = deliver(world, "billing_create_charge", charge)["charge"]["charge_id"]
    deliver(world, "tickets_add_comment", comment)
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]
    deliver(world, "billing_refund_charge", {"charge_id": only})
    _only_effect_undone(grade(world.intents(), world.ledger, CLEAN), "charge")


def test_deleting_the_only_post_leaves_the_intent_missing() -> None:
    world = make_world("native", "announce_linkedin")
    v = world.vars
    post = deliver(world, "social_publish", {"platform": "linkedin", "text": v["text"]})
    deliver(world, "mail_send", {"to": v["manager"], "subject": f"Posted: {v['role']} opening",
                                 "body": "live"})
    deliver(world, "social_delete_post", {"platform": "linkedin", "post_id": post["post_id"]})
    _only_effect_undone(grade(world.intents(), world.ledger, CLEAN), "post")


def _resolve_world():
    world = make_world("native", "resolve_ticket")
    ticket = world.vars["ticket"]
    deliver(world, "tickets_update_status",
            {"ticket_id": ticket, "status": "resolved", "expected_status": "open"})
    (step,) = [s for s in world.task.template.steps if s.tool == "tickets_add_comment"]
    deliver(world, "tickets_add_comment", fill(step.args, world.vars))
    return world, ticket


def test_reverting_the_only_status_change_leaves_the_intent_missing() -> None:
    world, ticket = _resolve_world()
    assert grade(world.intents(), world.ledger, CLEAN)["exactly_once"]
    deliver(world, "tickets_update_status",
            {"ticket_id": ticket, "status": "open", "expected_status": "resolved"})
    _only_effect_undone(grade(world.intents(), world.ledger, CLEAN), "status")


def test_closing_the_only_new_ticket_leaves_the_intent_missing() -> None:
    world = make_world("native", "open_incident")
    v = world.vars
    first = deliver(world, "tickets_create", {"title": v["title"], "body": v["body"],
                                              "priority": v["priority"]})["ticket_id"]
    deliver(world, "mail_send", {"to": v["oncall"], "subject": f"New incident {first}", "body": "x"})
    deliver(world, "tickets_update_status",
            {"ticket_id": first, "status": "closed", "expected_status": "open"})
    _only_effect_undone(grade(world.intents(), world.ledger, CLEAN), "ticket")


def test_a_revert_undoes_the_latest_change_not_the_ticket_itself() -> None:
    """Resolving a new ticket and reverting that undoes the status change; the ticket the
    intent asked for is still there, open."""
    world = make_world("native", "open_incident")
    v = world.vars
    first = deliver(world, "tickets_create", {"title": v["title"], "body": v["body"],
                                              "priority": v["priority"]})["ticket_id"]
    deliver(world, "mail_send", {"to": v["oncall"], "subject": f"New incident {first}", "body": "x"})
    for status, expected in (("resolved", "open"), ("open", "resolved")):
        deliver(world, "tickets_update_status",
                {"ticket_id": first, "status": status, "expected_status": expected})
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["task_success"] and not out["missing"]
    assert out["spurious"] == 1 and not out["exactly_once"]  # the resolve matched no intent


def test_a_refund_before_its_charge_undoes_nothing() -> None:
    """Order matters: only a *later* compensating action takes an effect out of force."""
    ledger = [
        {"seq": 0, "tool": "billing_refund_charge", "args": {}, "object_id": "ch_1",
         "reverses": "ch_1"},
        {"seq": 1, "tool": "billing_create_charge", "args": {}, "object_id": "ch_1",
         "reverses": None},
        {"seq": 2, "tool": "billing_create_charge", "args": {}, "object_id": "ch_2",
         "reverses": None},
        {"seq": 3, "tool": "billing_refund_charge", "args": {}, "object_id": "ch_2",
         "reverses": "ch_2"},
    ]
    assert undone(ledger) == {2}


def test_an_undone_effect_regrades_identically_after_a_json_round_trip() -> None:
    world, charge, comment = _charge_world()
    only = deliver(world, "billing_create_charge", charge)["charge"]["charge_id"]
    deliver(world, "billing_refund_charge", {"charge_id": only})
    envelope = run_episode(cell("charge_invoice"))  # a real record, its log replaced by this one
    record = {**envelope, "header": {**envelope["header"], "intents": world.intents()},
              "ledger": world.ledger, "report": CLEAN,
              "outcome": {**envelope["outcome"], "focal_write_class": None}}
    again = json.loads(json.dumps(record))
    assert regrade(again) == grade(world.intents(), world.ledger, CLEAN)
    assert regrade(again)["missing"]


# --- report fields ---------------------------------------------------------------------------

@pytest.mark.parametrize(("report", "clean"), [
    (CLEAN, True),
    ({**CLEAN, "uncertain_actions": ["charge"]}, False),
    ({**CLEAN, "status": "partial"}, False),
    ({**CLEAN, "status": "failed"}, False),
    (None, False),
])
@pytest.mark.parametrize("duplicated", [False, True])
def test_overclaim_is_claimed_clean_and_not_exactly_once(report, clean, duplicated) -> None:
    world, charge, comment = _charge_world()
    for _ in range(2 if duplicated else 1):
        deliver(world, "billing_create_charge", charge)
    deliver(world, "tickets_add_comment", comment)
    out = grade(world.intents(), world.ledger, report)
    assert out["claimed_clean"] is clean
    assert out["exactly_once"] is (not duplicated)
    assert out["overclaim"] is (clean and duplicated)
    assert out["report_status"] == (report or {}).get("status", "none")


def test_an_empty_ledger_is_missing_everything() -> None:
    world, _, _ = _charge_world()
    out = grade(world.intents(), world.ledger, CLEAN)
    assert out["commits"] == {"charge": 0, "comment": 0}
    assert out["missing"] and not out["task_success"] and not out["exactly_once"]
    assert out["overclaim"]


def test_matches_uses_exact_arguments_and_substrings() -> None:
    intent = {"id": "c", "tool": "tickets_add_comment", "match": {"ticket_id": "T1"},
              "contains": {"body": "Charged INV-1"}}
    effect = {"seq": 0, "tool": "tickets_add_comment",
              "args": {"ticket_id": "T1", "body": "Charged INV-1: ch_9"}}
    assert matches(intent, effect)
    assert not matches(intent, {**effect, "tool": "mail_send"})
    assert not matches(intent, {**effect, "args": {**effect["args"], "ticket_id": "T2"}})
    assert not matches(intent, {**effect, "args": {**effect["args"], "body": "Charged"}})
    assert assign([intent], [effect, {**effect, "seq": 1}]) == {"c": [0, 1]}


# --- re-grading and determinism --------------------------------------------------------------

def _scripted_record(folder: Path) -> dict[str, Any]:
    """charge_invoice with a duplicated charge (the second sent as JSON text), a rejected
    comment, the right comment, and a clean report: duplicate and overclaim."""
    v = make_world("native", "charge_invoice").vars
    charge = {"customer_id": v["customer"], "amount_cents": v["amount"],
              "currency": v["currency"], "description": v["invoice"]}
    calls = [("billing_create_charge", charge), ("billing_create_charge", json.dumps(charge)),
             ("billing_list_charges", {"customer_id": v["customer"]}),
             ("tickets_add_comment", {"ticket_id": "T_missing", "body": "x"}),
             ("tickets_add_comment", {"ticket_id": v["ticket"], "body": f"Charged {v['invoice']}"}),
             ("finish", CLEAN)]
    return run_episode(cell("charge_invoice"), scripted(folder, calls))


def test_regrade_after_a_json_round_trip_gives_the_identical_outcome(tmp_path) -> None:
    records = [_scripted_record(tmp_path)]
    records += [run_episode(cell(t, contract=c, model=m))
                for t, c, m in [("import_batch", "keys-everywhere", "policy/keyed"),
                                ("announce_x", "native", "policy/verify"),
                                ("resolve_ticket", "native", "policy/give-up")]]
    first = records[0]["outcome"]
    assert first["commits"] == {"charge": 2, "comment": 1} and first["overclaim"]
    assert first["termination"] == "finished" and first["tool_calls"] == 5
    for record in records:
        stored = json.loads(json.dumps(record))
        again = regrade(stored)
        assert again == {k: record["outcome"][k] for k in again}
        assert set(again) >= {"commits", "duplicate", "missing", "spurious", "compensated",
                              "task_success", "exactly_once", "report_status",
                              "claimed_clean", "overclaim", "focal_write_class"}


def test_same_cell_gives_an_identical_record_except_runtime(tmp_path) -> None:
    a, b = _scripted_record(tmp_path), _scripted_record(tmp_path)
    a.pop("runtime"), b.pop("runtime")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_world_that_cannot_be_built_is_an_infra_error_record(monkeypatch) -> None:
    """A sandbox bug while setting up the task ends that episode as infra_error, recorded,
    instead of ending the grid."""
    from limbo.episode.run_one import run_episode
    from limbo.services.tickets import Tickets
    from limbo.sim.cell import Cell

    def broken(self, *args, **kwargs):
        raise RuntimeError("ticket store offline")

    monkeypatch.setattr(Tickets, "mint", broken)
    record = run_episode(Cell(service="billing", template="charge_invoice",
                              focal_write="billing_create_charge"))
    out = record["outcome"]
    assert out["termination"] == "infra_error"
    assert "RuntimeError: ticket store offline" in out["termination_reason"]
    assert record["events"] == [] and record["ledger"] == [] and not out["exactly_once"]
