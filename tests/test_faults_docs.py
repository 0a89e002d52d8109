"""The documentation's example mode really works, and the catalog says what the spec says."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from limbo.base import registry
from limbo.episode.run_one import run_episode
from limbo.sim.catalog import catalog, group_members
from limbo.sim.cell import Cell
from limbo.sim.tasks import templates

DOC = Path(__file__).resolve().parents[1] / "docs" / "faults.md"

FAMILIES = {
    "timeout_pre": "not executed", "http500_pre": "not executed", "throttle_pre": "not executed",
    "timeout_post": "read-back resolves", "http500_post": "read-back resolves",
    "conn_reset_post": "read-back resolves", "partial_batch": "read-back resolves",
    "timeout_late": "late commit", "timeout_late_tail": "late commit",
    "redelivery": "read-back cannot", "stale_readback": "read-back cannot",
    "phantom_success": "phantom", "none": "none",
}


def example_source() -> str:
    text = DOC.read_text()
    section = text.split("## Adding a mode", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/faults.md has no python example under 'Adding a mode'"
    return match.group(1)


@pytest.fixture
def example_mode() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(example_source(), str(DOC), "exec"), namespace)  # our own documentation
    try:
        yield namespace["TimeoutLateShort"]
    finally:
        registry._REGISTRY["fault"].pop("timeout_late_short", None)


def _run(mode: str) -> dict[str, Any]:
    t = templates()["charge_invoice"]
    return run_episode(Cell(model="policy/give-up", fault=mode, service=t.service,
                            template="charge_invoice", focal_write="billing_create_charge"))


def _view(record: dict[str, Any]) -> str:
    seen = []
    for e in record["events"]:
        if e["type"] in ("turn", "call", "result"):
            seen.append(e)
            if e["type"] == "result":
                break
    return json.dumps(seen, sort_keys=True)


def test_the_documented_example_mode_runs(example_mode: Any) -> None:
    assert catalog()["timeout_late_short"].group == "timeout"
    assert "timeout_late_short" in group_members()["timeout"]
    record = _run("timeout_late_short")
    call = next(e for e in record["events"] if e["type"] == "call")
    [effect] = record["ledger"]
    assert effect["t"] == call["t"] + 40.0
    [arrival] = [e for e in record["events"] if e["type"] == "arrival"]
    assert arrival["outcome"] == "committed"
    # a true member of the timeout group: the agent cannot tell it from timeout_pre
    assert _view(record) == _view(_run("timeout_pre"))


def test_the_catalog_matches_the_spec() -> None:
    info = catalog()
    assert {m: i.family for m, i in info.items()} == FAMILIES
    assert info["timeout_late"].families == ("late commit", "read-back cannot")
    assert info["timeout_late_tail"].families == ("late commit", "read-back cannot")
    assert all(i.family in i.families for i in info.values())
    assert [m for m, i in info.items() if i.batch_only] == ["partial_batch"]
    assert all(i.sees and i.hidden and "\n" not in i.sees + i.hidden for i in info.values())


def test_every_mode_is_documented() -> None:
    text = DOC.read_text()
    for mode in catalog():
        assert f"`{mode}`" in text, mode
