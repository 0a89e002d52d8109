"""Extension: a provider registered with ``@model_adapter`` is found through ``--plugin`` (a
file or a module name); and the "Add a model adapter" example of docs/models.md, exactly as
printed, runs a full episode. (An installed distribution's ``limbo.models`` entry point is
covered with the other kinds in tests/test_plugins.py.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.cells import cell_for
from support.reference import briefed

from limbo.base.registry import _REGISTRY, entries, load_plugin
from limbo.episode.briefing import context
from limbo.episode.run_one import run_episode
from limbo.gateway import ThreadedGateway
from limbo.sim.world import World

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "models.md"


def example() -> str:
    """The first Python block after the "Add a model adapter" heading."""
    section = DOC.read_text().split("## Add a model adapter", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def forget_models():
    before = dict(_REGISTRY.get("model", {}))
    yield
    _REGISTRY["model"] = before


def test_the_docs_example_is_short_and_runs_a_full_episode(tmp_path, forget_models) -> None:
    code = example()
    assert len(code.splitlines()) < 40
    path = tmp_path / "mychat.py"
    path.write_text(code)
    load_plugin(str(path))
    assert "mychat" in entries("model")
    cell = cell_for("charge_invoice", "billing_create_charge", fault="timeout_post")
    reference = run_episode(cell)
    with ThreadedGateway() as gw:  # one session: requests need no episode prefix
        cell = cell.model_copy(update={"model": f"mychat/verify?base_url={gw.url}/v1"})
        world = World.of(cell)
        session = gw.open(cell.episode_id, briefed(world), context(world))
        record = run_episode(cell)
    assert record["outcome"]["termination"] == "finished"
    assert session.requests == record["outcome"]["model_turns"] == reference["outcome"]["model_turns"]
    for part in ("ledger", "report"):
        assert record[part] == reference[part]
    # the example passes arguments on as the JSON text the server sent; the log keeps that text
    assert [_parsed(e) for e in record["events"]] == reference["events"]
    assert record["outcome"]["exactly_once"] and record["outcome"]["cost_usd"] is None


def _parsed(event: dict) -> dict:
    if event["type"] == "call" and isinstance(event["args"], str):
        return {**event, "args": json.loads(event["args"])}
    return event


def test_a_plugin_given_as_a_module_name(tmp_path, monkeypatch, forget_models) -> None:
    (tmp_path / "my_limbo_plugin.py").write_text(
        "from limbo.episode.models import model_adapter\n"
        "from limbo.harnesses.policies import PolicyAdapter\n\n"
        "@model_adapter('plugged')\nclass Plugged(PolicyAdapter):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugin("my_limbo_plugin")
    record = run_episode(cell_for("charge_invoice", "billing_create_charge", model="plugged/verify"))
    assert record["outcome"]["exactly_once"]
    monkeypatch.delitem(sys.modules, "my_limbo_plugin")
