"""The parts of ``limbo conform`` that need no server: arguments made from what a schema says
(and refused where it says too little), the declarations made for undeclared tools (and the
tools left untracked where no world file could declare them), which properties apply to what,
and the JUnit a CI reads."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from limbo.proxy.conform.checks import PROPERTIES, not_applicable
from limbo.proxy.conform.report import CheckVerdict, Verdicts, junit, table
from limbo.proxy.conform.subjects import catalog_for, subjects
from limbo.proxy.conform.values import Unmakeable, make, value, vary
from limbo.sim.worldfile.check import checked

WORLD = Path(__file__).parent / "fixtures" / "conform" / "gallery.toml"


def test_values_keep_to_what_the_schema_allows() -> None:
    spec = {"type": "object", "required": ["name", "n", "kind", "tags", "when", "flag"],
            "properties": {
                "name": {"type": "string", "minLength": 40, "maxLength": 50},
                "n": {"type": "integer", "minimum": 100, "maximum": 100},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "when": {"anyOf": [{"type": "null"}, {"type": "number", "exclusiveMinimum": 0}]},
                "flag": {"type": "boolean"}, "note": {"type": "string"}}}
    made = make(spec, "t1", skip="idempotency_key")
    assert set(made) == set(spec["required"])  # an optional argument is left to the server
    assert 40 <= len(made["name"]) <= 50 and made["name"].startswith("t1-name")
    assert made["n"] == 100 and made["kind"] == "a" and len(made["tags"]) == 2
    assert made["when"] == 1.0 and made["flag"] is False
    other = vary(spec, made, "t1", prefer=["n", "kind"])
    assert other is not None and other["kind"] == "b" and other["n"] == 100  # n cannot move


def test_an_argument_no_value_can_be_made_for_is_said() -> None:
    with pytest.raises(Unmakeable, match="argument blob"):
        value("blob", {"type": "null"}, "t")
    assert vary({"properties": {"only": {"const": 3}}}, {"only": 3}, "t", []) is None


def _tool(name: str, props: dict[str, Any], required: list[str], **hints: bool
          ) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object", "properties": props,
                                          "required": required},
            **({"annotations": hints} if hints else {})}


def test_undeclared_writes_are_declared_from_their_schema_or_left_untracked() -> None:
    listed = [
        _tool("create_charge", {"customer": {"type": "string"}, "amount_cents": {
            "type": "integer"}, "idempotency_key": {"type": "string"}}, ["customer"]),
        _tool("Create-Refund", {"charge": {"type": "string"}}, ["charge"]),
        _tool("insert_rows", {"rows": {"type": "array"}}, ["rows"]),
        _tool("ping", {}, []),
        _tool("get_thing", {"id": {"type": "string"}}, ["id"], readOnlyHint=True),
    ]
    catalog, own = catalog_for(None, None, listed)
    found = {s.wire: s for s in subjects(listed, catalog, own, [])}
    charge = found["create_charge"]
    assert charge.tool is not None and charge.tool.write is not None
    assert list(charge.tool.write.effect) == ["customer"] and charge.keyed
    assert found["insert_rows"].tool is not None  # a list of objects, as a world file says
    assert found["Create-Refund"].tool is None and found["ping"].tool is None  # untracked
    assert found["Create-Refund"].writes and not found["get_thing"].writes
    assert {s.source for s in found.values()} == {"annotations"}


def test_with_a_world_file_its_declarations_win_and_the_rest_come_from_annotations() -> None:
    world, source = checked(WORLD, tasks=False)
    listed = [_tool("create_charge", {"customer": {"type": "string"}}, ["customer"]),
              _tool("get_balance", {"customer": {"type": "string"}}, ["customer"],
                    readOnlyHint=True),
              _tool("refund", {"charge_id": {"type": "string"}}, ["charge_id"])]
    catalog, own = catalog_for(world, "gallery@x", listed)
    found = {s.wire: s for s in subjects(listed, catalog, own, ["create_charge", "refund"])}
    assert set(found) == {"create_charge", "refund"}  # --tool: nothing else
    assert found["create_charge"].source == "world"
    assert found["create_charge"].prefer == ["customer", "amount_cents"]
    assert found["refund"].source == "annotations" and found["refund"].tool is not None
    with pytest.raises(Exception, match="offers no such tool"):
        subjects(listed, catalog, own, ["delete_everything"])


def test_what_applies_to_what() -> None:
    listed = [_tool("send", {"to": {"type": "string"}, "idempotency_key": {"type": "string"}},
                    ["to", "idempotency_key"], destructiveHint=False),
              _tool("look", {}, [], readOnlyHint=True), _tool("poke", {}, [])]
    catalog, own = catalog_for(None, None, listed)
    send, look, poke = subjects(listed, catalog, own, [])
    assert [n for n, p in PROPERTIES.items() if not_applicable(p, send, [send, look, poke])
            ] == [6, 8]  # its key is required; no other keyed write
    assert [n for n, p in PROPERTIES.items() if not_applicable(p, look, []) is None] == [7]
    assert [n for n, p in PROPERTIES.items() if not_applicable(p, poke, []) is None] == [6]


def test_junit_fails_a_required_unknown_and_skips_the_rest(tmp_path: Path) -> None:
    def verdict(n: int, v: str) -> CheckVerdict:
        return CheckVerdict(tool="send", declared=None, property=n, name=PROPERTIES[n].name,
                            verdict=v, why=f"why {n}", source="annotations",  # type: ignore[arg-type]
                            arguments_from="input schema", observed_by="x", reproduce="limbo")
    report = Verdicts(upstream="stdio x", server={}, world=None, observer="x", properties={},
                    required=[1], planned_calls=0, verdicts=[
                        verdict(1, "unknown"), verdict(2, "unknown"), verdict(3, "fail"),
                        verdict(6, "pass"), verdict(8, "not_applicable")])
    junit(report, tmp_path / "j.xml")
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert cases["1 replay"].find("failure") is not None
    assert cases["2 conflict"].find("skipped") is not None
    assert cases["3 timeout_post"].find("failure") is not None
    assert cases["8 key_scope"].find("skipped") is not None
    assert [v.property for v in report.failing()] == [1]
    assert "8 key_scope" not in table(report) and "reproduce send 3: limbo" in table(report)
