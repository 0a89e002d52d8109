"""Extension: a provider registered with ``@model_adapter`` is found through ``--plugin`` (a
file) and through the ``limbo.models`` entry-point group of an installed distribution; and the
"Add a model adapter" example of docs/models.md, exactly as printed, runs a full episode."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import cell_for

from limbo.adapter import make_adapter
from limbo.episode import _context, run_episode
from limbo.gateway import ThreadedGateway
from limbo.registry import _REGISTRY, entries, load_plugin
from limbo.world import World

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "fixtures" / "limbo_ext_demo"
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
        session = gw.open(cell.episode_id, make_adapter("policy/verify"), _context(World(cell)))
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
        "from limbo.adapter import model_adapter\n"
        "from limbo.harnesses.policies import PolicyAdapter\n\n"
        "@model_adapter('plugged')\nclass Plugged(PolicyAdapter):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugin("my_limbo_plugin")
    record = run_episode(cell_for("charge_invoice", "billing_create_charge", model="plugged/verify"))
    assert record["outcome"]["exactly_once"]
    monkeypatch.delitem(sys.modules, "my_limbo_plugin")


def _install(site: Path) -> None:
    """Install the demo distribution into ``site`` the way pip lays it out: the module plus a
    ``.dist-info`` whose ``entry_points.txt`` comes from the demo's own pyproject."""
    project = tomllib.loads((DEMO / "pyproject.toml").read_text())["project"]
    shutil.copy(DEMO / "limbo_ext_demo.py", site)
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    lines = ["[limbo.models]"] + [f"{k} = {v}" for k, v in
                                  project["entry-points"]["limbo.models"].items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def test_an_installed_distribution_is_found_through_its_entry_point(tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site)
    probe = (
        "import json, importlib.metadata as md\n"
        "from limbo.registry import entries\n"
        "from limbo.episode import run_episode\n"
        "from limbo.cell import Cell\n"
        "eps = [e.value for e in md.entry_points(group='limbo.models')]\n"
        "r = run_episode(Cell(model='demo-ext/verify', service='billing',"
        " template='charge_invoice', focal_write='billing_create_charge'))\n"
        "print(json.dumps({'eps': eps, 'models': list(entries('model')),"
        " 'module': entries('model')['demo-ext'].__module__,"
        " 'ok': r['outcome']['exactly_once']}))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    found = json.loads(out)
    assert "limbo_ext_demo" in found["eps"]
    assert "demo-ext" in found["models"] and found["module"] == "limbo_ext_demo"
    assert found["ok"] is True
