"""Task templates (world.md §5): enough of them, covering every focal-write row, valid against
the tools they call, unambiguous to grade, and deterministic per instance."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from limbo.base.errors import UsageError
from limbo.episode.run_one import run_episode
from limbo.log.grading import matches
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import Template, fill, instantiate, template, templates
from limbo.sim.tools import toolset

ALL = sorted(templates())
#: Every write row of world.md §4 that must be some template's focal write.
FOCAL_ROWS = {
    ("social_publish", "mastodon"), ("social_publish", "weibo"), ("social_publish", "linkedin"),
    ("social_publish", "x"), ("billing_create_charge", None), ("billing_refund_charge", None),
    ("tickets_create", None), ("tickets_add_comment", None), ("tickets_update_status", None),
    ("mail_send", None), ("data_insert", None), ("data_insert_many", None), ("data_upsert", None),
    ("deploy_trigger", None),
}


def _row(step) -> tuple[str, str | None]:
    return step.tool, step.args.get("platform") if step.tool == "social_publish" else None


def test_at_least_twelve_templates_and_two_per_service() -> None:
    per_service = Counter(t.service for t in templates().values())
    assert len(templates()) >= 12
    assert set(per_service) == {"social", "billing", "tickets", "mail", "data", "deploy"}
    assert min(per_service.values()) >= 2


def test_every_focal_write_row_is_the_main_write_of_some_template() -> None:
    main = {_row(next(s for s in t.steps if s.intent is not None)) for t in templates().values()}
    assert FOCAL_ROWS <= main


@pytest.mark.parametrize("name", ALL)
def test_template_shape(name: str) -> None:
    t = templates()[name]
    writes = [s for s in t.steps if s.intent is not None]
    assert 2 <= len(t.steps) <= 3 and len(writes) >= 2  # the agent must go on after the fault
    assert t.focal_writes == list(dict.fromkeys(s.tool for s in writes))
    assert t.steps[0].intent is not None  # the main write comes first
    for contract in CONTRACTS:
        tools = toolset(contract)
        for step in [*t.setup, *t.steps]:
            assert step.tool in tools and tools[step.tool].kind == "write", step.tool


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("instance", [0, 1, 7])
def test_plan_arguments_validate_against_the_tools(name: str, instance: int) -> None:
    t = templates()[name]
    task = instantiate(t, instance)
    env = {**task.vars, **{v: f"saved_{v}" for s in [*t.setup, *t.steps] for v in s.save}}
    for step in [*t.setup, *t.steps]:
        args = fill(step.args, env)
        spec = toolset("native")[step.tool]
        spec.model.model_validate(args)  # raises on a template bug


@pytest.mark.parametrize("name", ALL)
def test_prompt_and_intents_are_fully_resolved(name: str) -> None:
    from support.worlds import make_world

    world = make_world("native", name)
    placeholder = re.compile(r"\{[a-z_][a-z0-9_]*\}")
    assert not placeholder.search(world.prompt())
    intents = world.intents()
    assert len({i["id"] for i in intents}) == len(intents)
    assert not placeholder.search(json.dumps(intents, ensure_ascii=False))
    for value in world.vars.values():  # the prompt states every argument the agent needs
        if isinstance(value, str) and value in json.dumps(intents, ensure_ascii=False):
            assert value in world.prompt(), value


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("contract", CONTRACTS)
def test_every_plan_effect_matches_exactly_one_intent(name: str, contract: str) -> None:
    t = templates()[name]
    record = run_episode(Cell(service=t.service, template=name, focal_write=t.focal_writes[0],
                              contract=contract, model="policy/verify"))
    intents = record["header"]["intents"]
    for effect in record["ledger"]:
        assert sum(matches(i, effect) for i in intents) == 1, effect


def test_batch_template_has_five_to_ten_distinct_rows() -> None:
    batch = [t for t in templates().values() if "data_insert_many" in t.focal_writes]
    assert batch
    for t in batch:
        for instance in range(40):
            rows = fill(t.steps[0].args["rows"], instantiate(t, instance).vars)
            assert 5 <= len(rows) <= 10
            assert len({json.dumps(r, sort_keys=True) for r in rows}) == len(rows)


@pytest.mark.parametrize("name", ALL)
def test_instances_are_deterministic_and_vary(name: str) -> None:
    t = templates()[name]
    assert instantiate(t, 3).vars == instantiate(t, 3).vars
    distinct = {json.dumps(instantiate(t, i).vars, sort_keys=True) for i in range(10)}
    assert len(distinct) == 10


def test_instances_are_the_same_in_another_process() -> None:
    script = ("import json; from limbo.sim.tasks import templates, instantiate; "
              "print(json.dumps({n: [instantiate(t, i).vars for i in range(3)] "
              "for n, t in templates().items()}, sort_keys=True))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, check=True, cwd=os.path.dirname(__file__)).stdout
    here = {n: [instantiate(t, i).vars for i in range(3)] for n, t in templates().items()}
    assert json.loads(out) == json.loads(json.dumps(here))


def test_instance_zero_is_the_default_and_canonical() -> None:
    assert Cell(service="billing", template="charge_invoice",
                focal_write="billing_create_charge").instance == 0
    v = instantiate(template("charge_invoice"), 0).vars
    assert v["instance"] == 0 and v["invoice"] == "INV-0031"
    assert instantiate(template("import_batch"), 0).vars["batch"] == "B09"


def test_templates_are_validated_data() -> None:
    raw = templates()["charge_invoice"].model_dump(mode="json")
    with pytest.raises(ValueError):
        Template.model_validate({**raw, "unexpected": 1})
    with pytest.raises(ValueError):
        Template.model_validate({**raw, "vars": {"x": {"choice": [1], "range": [1, 2, 1]}}})
    with pytest.raises(UsageError, match="charge_invoice"):
        template("no_such_template")
