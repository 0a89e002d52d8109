"""NaN and Infinity in tool arguments: Python's ``json`` reads and writes them, JSON does not.
One reaching the ledger would make the episode record invalid JSON, so the boundary refuses
them as ``invalid_argument`` — in JSON text, in a dict, nested in rows and lists — and the
record of an episode whose model sends them stays strict JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from support.scripted import scripted
from support.worlds import make_world

from limbo.episode.run_one import run_episode
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import templates
from limbo.sim.tools import KEY_FIELD, toolset

NAN, INF = float("nan"), float("inf")

TEXT_CALLS = [
    ("data_insert", '{"table": "t", "row": {"x": NaN}}'),
    ("data_insert", '{"table": "t", "row": {"x": Infinity}}'),
    ("data_insert", '{"table": "t", "row": {"x": -Infinity}}'),
    ("data_insert", '{"table": "t", "row": {"x": 1e999}}'),  # overflows to inf on parsing
    ("data_insert_many", '{"table": "t", "rows": [{"a": 1}, {"b": NaN}]}'),
    ("data_query", '{"table": "t", "where": {"x": NaN}}'),
    ("wait", '{"seconds": NaN}'),
]
DICT_CALLS = [
    ("data_insert", {"table": "t", "row": {"x": NAN}}),
    ("data_insert", {"table": "t", "row": {"x": INF}}),
    ("data_insert", {"table": "t", "row": {"x": -INF}}),
    ("data_insert_many", {"table": "t", "rows": [{"a": 1}, {"b": NAN}]}),
    ("data_upsert", {"table": "t", "key": "k", "row": {"x": NAN}}),
    ("data_query", {"table": "t", "where": {"x": INF}}),
    ("wait", {"seconds": NAN}),
]


@pytest.mark.parametrize(("tool", "args"), TEXT_CALLS + DICT_CALLS)
def test_non_finite_numbers_are_invalid_arguments_and_commit_nothing(tool: str, args: Any) -> None:
    world = make_world("native", "record_signup")
    got = world.boundary.call(tool, args)
    assert got["ok"] is False and got["error"]["kind"] == "invalid_argument", got
    assert world.ledger == [] and world.now == 0


def test_a_dict_and_its_json_text_are_refused_with_the_same_message() -> None:
    """So a replay, which sends the logged text, sees what the recorded dict saw."""
    world = make_world("native", "record_signup")
    for args in ({"table": "t", "row": {"a": 1.5, "x": NAN, "y": INF}},
                 {"table": "t", "rows": [{"a": -INF}, {"b": NAN}]}):
        tool = "data_insert_many" if "rows" in args else "data_insert"
        as_dict = world.boundary.call(tool, args)
        as_text = world.boundary.call(tool, json.dumps(args))
        assert as_dict == as_text
        assert "only finite numbers" in as_dict["error"]["message"]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_the_argument_models_refuse_non_finite_floats_nested_in_rows(contract: str) -> None:
    """The models themselves (not only the boundary's pre-check) refuse them, so nothing that
    validates arguments through a tool model can let one through — under keys-everywhere with
    a key sent too, on every write that then takes one."""
    tools = toolset(contract)
    keyed = contract == "keys-everywhere"
    for tool, args in DICT_CALLS:
        key = {KEY_FIELD: "k-1"} if keyed and tools[tool].kind == "write" else {}
        assert bool(key) == (keyed and tools[tool].accepts_key), tool
        with pytest.raises(ValidationError):
            tools[tool].model.model_validate({**args, **key})
    key = {KEY_FIELD: "k-1"} if keyed else {}
    finite = tools["data_insert"].model.model_validate({"table": "t", "row": {"x": 1.5}, **key})
    assert finite.model_dump()["row"] == {"x": 1.5}
    assert finite.model_dump().get(KEY_FIELD) == key.get(KEY_FIELD)


def test_an_episode_whose_model_sends_nan_records_strict_json(tmp_path) -> None:
    t = templates()["record_signup"]
    cell = Cell(service=t.service, template=t.id, focal_write=t.focal_writes[0])
    bad = DICT_CALLS[:2] + TEXT_CALLS[:1]
    turns = [[c] for c in bad] + [
        [("data_insert", {"table": "t", "row": {"x": 2.5}})],
        [("finish", {"status": "completed", "summary": "done"})]]
    record = run_episode(cell, scripted(tmp_path, turns))
    json.dumps(record, allow_nan=False)  # raises on a bare NaN / Infinity anywhere
    results = [e["result"] for e in record["events"] if e["type"] == "result"]
    assert [r["ok"] for r in results] == [False, False, False, True]
    assert all(r["error"]["kind"] == "invalid_argument" for r in results[:3])
    assert [e["args"] for e in record["ledger"]] == [{"table": "t", "row": {"x": 2.5}}]
    calls = [e for e in record["events"] if e["type"] == "call"]
    assert calls[0]["args"] == '{"table": "t", "row": {"x": NaN}}'  # logged as its text
    assert calls[3]["args"] == {"table": "t", "row": {"x": 2.5}}    # finite: logged as sent
