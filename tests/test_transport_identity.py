"""How a model is reached — ``base_url``, ``timeout``, ``max_attempts``, ``api_key_env`` — is not
part of a cell's identity: a server moved to another port keeps every cell (the run resumes),
the records name the model without it, and the manifest records it. Built-in cells keep their
ids."""

from __future__ import annotations

import json

from support.bad_server import CHAT_OK, BadServer, Reply
from support.hostile import cli, records

from limbo.experiments.grid import load_grid
from limbo.experiments.source import CellSource
from limbo.run.plan import plan
from limbo.sim.cell import Cell

TASK = {"service": "billing", "template": "charge_invoice", "focal_write": "billing_create_charge"}
SMALL = ["--template", "charge_invoice", "--fault", "none", "--fault", "timeout_post",
         "--contract", "native", "--no-cache", "--quiet"]


def test_transport_parameters_leave_the_id_and_the_model() -> None:
    a = Cell(model="openai/m?api=chat&base_url=http://127.0.0.1:9/v1&timeout=5", **TASK)
    b = Cell(model="openai/m?base_url=http://10.0.0.2:8000/v1&api=chat&max_attempts=2", **TASK)
    plain = Cell(model="openai/m?api=chat", **TASK)
    assert a.model == b.model == plain.model == "openai/m?api=chat"
    assert a.episode_id == b.episode_id == plain.episode_id
    assert a.transport == (("base_url", "http://127.0.0.1:9/v1"), ("timeout", 5))
    assert "transport" not in a.public()
    other = Cell(model="openai/m?api=chat&temperature=0.5&base_url=http://x/v1", **TASK)
    assert other.model == "openai/m?api=chat&temperature=0.5"  # what the model answers: kept
    assert other.episode_id != plain.episode_id


def test_built_in_grids_keep_their_ids(monkeypatch, tmp_path) -> None:
    """Pinned before the change: the default and paper grids' fingerprints (the set of their
    episode ids) must not move. Pinned where no production harness is installed (the paper
    grid's harness cells are dropped then), as `make test` installs them."""
    monkeypatch.setenv("LIMBO_HARNESS_DIR", str(tmp_path / "none"))
    assert plan(CellSource(load_grid("default")), None).fingerprint == (
        "3850-56d7d2f7b6002f894564c4af71340c97")
    assert plan(CellSource(load_grid("paper")), None).fingerprint == (
        "39600-32dc56c891604dc4e72249e0f401482c")


def test_a_server_on_another_port_resumes_the_same_run(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    with BadServer(Reply(body=CHAT_OK)) as first:
        model = f"openai/m?api=chat&base_url={first.url}&max_attempts=2"
        done = cli(capsys, "run", "--model", model, *SMALL, "--out", str(out), "--limit", "1")
        assert done.code == 0, done.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["transport"] == {"openai/m?api=chat": {"base_url": first.url,
                                                           "max_attempts": 2}}
    with BadServer(Reply(body=CHAT_OK)) as second:  # another port
        model = f"openai/m?api=chat&base_url={second.url}&max_attempts=2"
        again = cli(capsys, "run", "--model", model, *SMALL, "--out", str(out))
        assert again.code == 0, again.err
        assert "ran 3 episodes, 1 already done" in again.out  # resumed, not refused
        assert len(second.requests) == 3
    got = records(out)
    assert [r["cell"]["model"] for r in got] == ["openai/m?api=chat"] * 4
    assert json.loads((out / "manifest.json").read_text())["transport"] == {
        "openai/m?api=chat": {"base_url": second.url, "max_attempts": 2}}
