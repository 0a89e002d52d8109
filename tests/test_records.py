"""The published record schema is what LIMBO writes: every record and every event of the default
grid validates against ``limbo schema`` with an independent JSON Schema validator (the
``jsonschema`` package, not the project's models), and the models read each record back to the
same JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cell_for
from jsonschema import Draft202012Validator
from support.hostile import LIMBO, cli, spawn

from limbo.episode.run_one import run_episode
from limbo.experiments.grid import expand, load_grid
from limbo.log.records import EDGE, RECORD_FIELDS
from limbo.run.context import RunContext
from limbo.run.runner import run_cells
from limbo.sim.config import Limits
from limbo.sim.events import EVENT_TYPES

EXTRA_CONDITIONS = ("sdk-retry", "vbr", "wait-60", "state-oracle", "outcome-oracle", "reflect",
                    "guard")
"""The default grid runs the vanilla prompt only: these cells add the scaffolds' and the
guard's events, and a turn limit adds a ``limit`` event, so every event type is validated."""


DOC = Path(__file__).resolve().parents[1] / "docs" / "records.md"


def shown(language: str) -> str:
    """The first ``language`` block of docs/records.md."""
    return DOC.read_text(encoding="utf-8").split(f"```{language}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The schema as published in docs/records.md (the same text as ``limbo schema``)."""
    published = json.loads(shown("json"))
    Draft202012Validator.check_schema(published)
    return published


@pytest.fixture(scope="module")
def default_grid(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The record lines of the whole default grid (3,850 episodes, two workers)."""
    out = tmp_path_factory.mktemp("default")
    cells = expand(load_grid("default")).cells
    result = run_cells(cells, RunContext(out=out, workers=2), {"grid": {"name": "default"}})
    assert result.ran == len(cells) == 3850
    return (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()


def extra_lines() -> list[str]:
    cells = [cell_for("charge_invoice", model="policy/blind", condition=c, fault="timeout_post")
             for c in EXTRA_CONDITIONS]
    cells.append(cell_for("charge_invoice", model="policy/verify", limits=Limits(model_turns=1)))
    return [json.dumps(run_episode(c)) for c in cells]


class SchemaCheck:
    """Validates records with ``jsonschema`` against the published schema, part by part: the
    record's own keys, each distinct value of each property, and each distinct item of each
    array. Identical JSON validates identically, so checking a distinct value once is the same
    as checking every copy. Splitting is exact for this schema, whose properties and items are
    independent (asserted), and an event is checked against the one branch of the ``oneOf``
    its ``type`` names in the published discriminator (exact too: each branch requires its own
    ``type``, asserted). Together they make the whole default grid take seconds, not minutes."""

    TOP = {"$schema", "title", "description", "type", "properties", "required",
           "additionalProperties", "$defs"}

    def __init__(self, schema: dict[str, Any]) -> None:
        assert set(schema) <= self.TOP, set(schema) - self.TOP
        root = Draft202012Validator(schema)
        own: dict[str, Any] = {}
        self.parts: dict[str, Any] = {}
        self.items: dict[str, Any] = {}
        for name, sub in schema["properties"].items():
            if sub.get("type") == "array":
                assert set(sub) <= {"type", "items", "title", "description"}, sub
                own[name] = {"type": "array"}
                self.items[name] = self._branches(root, sub["items"])
            elif "$ref" in sub or "anyOf" in sub:
                own[name] = True
                self.parts[name] = root.evolve(schema=sub)
            else:
                own[name] = sub
        self.top = root.evolve(schema={**schema, "properties": own})
        self.seen: dict[tuple[str, str], list[str]] = {}
        self.events = 0

    @staticmethod
    def _branches(root: Any, items: dict[str, Any]) -> dict[str | None, Any]:
        """Validators of an array's items: one per discriminator value, or one (``None``)."""
        if "discriminator" not in items:
            return {None: root.evolve(schema=items)}
        mapping = items["discriminator"]["mapping"]
        assert items["discriminator"]["propertyName"] == "type"
        assert sorted(b["$ref"] for b in items["oneOf"]) == sorted(mapping.values())
        defs = root.schema["$defs"]
        for value, ref in mapping.items():
            branch = defs[ref.rsplit("/", 1)[1]]
            assert branch["properties"]["type"]["const"] == value and "type" in branch["required"]
        return {value: root.evolve(schema={"$ref": ref}) for value, ref in mapping.items()}

    def _check(self, where: str, validator: Any, value: Any) -> list[str]:
        key = (where, json.dumps(value, sort_keys=True))
        if key not in self.seen:
            self.seen[key] = [f"{where}: {e.message[:200]}" for e in validator.iter_errors(value)]
        return self.seen[key]

    def _item(self, name: str, item: Any) -> list[str]:
        branches = self.items[name]
        if None in branches:
            return self._check(f"{name}[]", branches[None], item)
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in branches:
            return [f"{name}[]: type {kind!r} is not one of the schema's event types"]
        return self._check(f"{name}[]", branches[kind], item)

    def errors(self, record: dict[str, Any]) -> list[str]:
        found = [f"record: {e.message[:200]}" for e in self.top.iter_errors(record)]
        for name, validator in self.parts.items():
            if name in record:
                found += self._check(name, validator, record[name])
        for name in self.items:
            if isinstance(record.get(name), list):
                self.events += len(record[name]) if name == "events" else 0
                for item in record[name]:
                    found += self._item(name, item)
        return found


def test_every_record_and_event_of_the_default_grid_validates_against_the_schema(
        schema: dict[str, Any], default_grid: list[str]) -> None:
    check = SchemaCheck(schema)
    types: set[str] = set()
    for number, line in enumerate([*default_grid, *extra_lines()], start=1):
        record = json.loads(line)
        assert check.errors(record) == [], f"line {number}"
        types |= {e["type"] for e in record["events"]}
    assert types == EVENT_TYPES  # every event type was met and validated
    assert check.events > 50_000  # every event of the grid, not a sample


def test_the_edge_reads_every_record_back_to_the_same_json(default_grid: list[str]) -> None:
    for line in [*default_grid, *extra_lines()]:
        record = json.loads(line)
        assert tuple(record) == RECORD_FIELDS  # the written order, which the loader relies on
        again = EDGE.validate_python(record)
        assert again == record and list(again) == list(record)


def test_a_whole_record_validates_with_the_plain_validator(schema, default_grid) -> None:
    """The part-by-part check agrees with validating a record whole."""
    validator = Draft202012Validator(schema)
    for line in default_grid[:: len(default_grid) // 5]:
        assert list(validator.iter_errors(json.loads(line))) == []


# -- hostile records ----------------------------------------------------------------------------


def _edited(line: str, how: str) -> dict[str, Any]:
    record = json.loads(line)
    if how == "termination":
        record["outcome"]["termination"] = "crashed"
    elif how == "event":
        record["events"][1]["type"] = "teleport"
    elif how == "field":
        record["outcome"]["exactly_once"] = "yes"
    else:
        record["events"][0]["surprise"] = 1
    return record


@pytest.mark.parametrize("how", ["termination", "event", "field", "extra"])
def test_an_edited_record_fails_the_schema_and_the_models(schema, default_grid, how) -> None:
    record = _edited(default_grid[0], how)
    assert list(Draft202012Validator(schema).iter_errors(record))
    with pytest.raises(ValueError):
        EDGE.validate_python(record)


def test_the_event_schema_refuses_an_unknown_type(capsys) -> None:
    result = cli(capsys, "schema", "--part", "event")
    validator = Draft202012Validator(json.loads(result.out))
    good = {"t": 1.0, "type": "clock", "reason": "wait", "seconds": 60.0}
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "type": "teleport"})
    assert not validator.is_valid({**good, "reason": "nap"})


def test_the_doc_shows_the_schema_the_command_prints() -> None:
    result = spawn("schema")
    assert result.returncode == 0 and shown("json") == result.stdout


def test_the_docs_validation_example_runs(tmp_path: Path) -> None:
    code = shown("python")
    run = spawn("run", "default", "--out", "runs/default", "--model", "policy/verify",
                "--template", "charge_invoice", "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    good = spawn_python(code, tmp_path)
    assert good.returncode == 0 and good.stdout == "", good.stderr
    path = tmp_path / "runs" / "default" / "episodes.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, json.dumps(_edited(lines[0], "termination"))]) + "\n")
    bad = spawn_python(code, tmp_path)
    assert bad.stdout.startswith(f"line {len(lines) + 1}: $.outcome.termination: 'crashed'")


def spawn_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(LIMBO).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_schema_is_a_cli_command(capsys) -> None:
    result = cli(capsys, "schema")
    assert result.code == 0
    assert json.loads(result.out)["properties"]["schema"]["enum"] == ["limbo.episode/1",
                                                                     "limbo.episode/2"]
