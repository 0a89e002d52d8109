"""Batch writes: what a batch is made of is declared once, on the operation
(:class:`limbo.services.Batch`), and every part that handles batches reads it from there —
the effects the service commits, the intents of a template, the partial-batch fault, the
read-back that finds the missing units and the narrowed re-send."""

from __future__ import annotations

import inspect

from support.cells import cell_for
from support.worlds import make_world

from limbo.episode.run_one import run_episode
from limbo.sim.readback import resolve
from limbo.sim.service import operations


def batch_ops() -> list:
    ops = [op for op in operations().values() if op.batch is not None]
    assert ops, "no batch write is registered"
    return ops


def test_every_batch_write_commits_one_effect_per_unit_in_its_declared_shape() -> None:
    for op in batch_ops():
        assert op.batch.units in inspect.signature(op.func).parameters, op.tool
        world = make_world("native", "import_batch")
        args = {"table": "leads", op.batch.units: [{"n": 1}, {"n": 2}, {"n": 1}]}
        assert world.boundary.call(op.tool, args)["ok"]
        assert [e["args"] for e in world.ledger] == op.batch.effects(args)


def test_narrowing_keeps_the_other_arguments_and_the_chosen_units_in_order() -> None:
    (op,) = [op for op in batch_ops() if op.tool == "data_insert_many"]
    args = {"table": "t", "rows": [{"i": 0}, {"i": 1}, {"i": 2}]}
    assert op.batch.narrow(args, [2, 0]) == {"table": "t", "rows": [{"i": 2}, {"i": 0}]}
    assert op.batch.basis(args) == {"table": "t"}
    assert args["rows"] == [{"i": 0}, {"i": 1}, {"i": 2}]  # the call itself is not touched


def test_a_batch_step_has_one_intent_per_unit_matching_what_commits() -> None:
    world = make_world("native", "import_batch")
    intents = [i for i in world.intents() if i["tool"] == "data_insert_many"]
    (step,) = [s for s in world.task.template.steps if s.tool == "data_insert_many"]
    rows = world.vars["rows"]
    assert len(intents) == len(rows) >= 2
    assert [i["id"] for i in intents] == [f"{step.id}[{n}]" for n in range(len(rows))]
    assert [i["match"] for i in intents] == [{"table": "leads", "row": row} for row in rows]


def test_the_read_back_of_a_partial_batch_names_exactly_the_missing_units() -> None:
    world = make_world("native", "import_batch")
    op = operations()["data_insert_many"]
    args = {"table": "leads", "rows": [{"n": 1}, {"n": 2}, {"n": 3}]}
    assert world.boundary.call("data_insert", {"table": "leads", "row": {"n": 2}})["ok"]
    plan = resolve(op, args)
    assert plan is not None and plan.units == args["rows"]
    seen = plan.check(world.boundary.call(plan.tool, plan.args))
    assert (seen.visible, seen.missing) == (False, [0, 2])
    assert [item["n"] for item in seen.items] == [2]


def test_a_partial_batch_then_the_missing_units_is_exactly_once() -> None:
    record = run_episode(cell_for("import_batch", model="policy/verify", fault="partial_batch"))
    (fault,) = [e for e in record["events"] if e["type"] == "fault"]
    k, n = fault["detail"]["k"], fault["detail"]["n"]
    assert 1 <= k < n
    sent = [e["args"]["rows"] for e in record["events"]
            if e["type"] == "call" and e["tool"] == "data_insert_many"]
    assert len(sent) == 2 and len(sent[1]) == n - k and sent[0][k:] == sent[1]
    assert record["outcome"]["exactly_once"]
