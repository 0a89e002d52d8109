"""``replay/RUN_DIR``: recorded episodes re-driven turn by turn reproduce their records, and a
deliberately changed service is reported at the first observation that no longer matches —
with the turn, the call and both results."""

from __future__ import annotations

import json

import pytest
from support.cells import cell_for
from support.model_servers import FAKE_OPENAI_KEY, Bridge, Metered, plain
from support.scripted import scripted

from limbo.base.errors import UsageError
from limbo.episode.models import ModelTurn, ToolCall
from limbo.episode.run_one import run_episode
from limbo.gateway import ThreadedGateway
from limbo.providers.replay import ReplayAdapter, load_records, verify_run
from limbo.services.tickets import Tickets

CELLS = [cell_for("charge_invoice", "billing_create_charge"),
         cell_for("charge_invoice", "billing_create_charge", fault="timeout_post"),
         cell_for("import_batch", "data_insert_many", fault="partial_batch"),
         cell_for("charge_invoice", "billing_create_charge", fault="http500_post",
                  model="policy/blind", condition="vbr")]


def write_run(root, records, torn=False):
    text = "".join(json.dumps(r) + "\n" for r in records)
    (root / "episodes.jsonl").write_text(text + ('{"schema": "limbo.ep' if torn else ""))
    return root


def test_replay_reproduces_every_recorded_episode(tmp_path) -> None:
    records = [run_episode(c) for c in CELLS]
    checks = verify_run(write_run(tmp_path, records, torn=True))
    assert [c.episode_id for c in checks] == [r["episode_id"] for r in records]
    assert all(c.identical and c.divergence is None and c.first_difference is None
               for c in checks), checks


def test_replay_as_the_model_of_a_cell(tmp_path) -> None:
    """What ``limbo run --model replay/RUN_DIR`` does: same cells, the model replaced."""
    recorded = run_episode(CELLS[1])
    write_run(tmp_path, [recorded])
    cell = CELLS[1].model_copy(update={"model": f"replay/{tmp_path}"})
    replayed = run_episode(cell)
    assert replayed["cell"]["model"] == f"replay/{tmp_path}"
    for part in ("events", "ledger", "outcome", "report", "usage"):
        assert replayed[part] == recorded[part]


def test_a_changed_service_is_reported_at_the_first_divergence(tmp_path, monkeypatch) -> None:
    recorded = run_episode(CELLS[0])
    write_run(tmp_path, [recorded])
    mint = Tickets.mint  # comments get other ids; tickets (in the task prompt) keep theirs
    monkeypatch.setattr(Tickets, "mint",
                        lambda self, prefix: "c_changed" if prefix == "c" else mint(self, prefix))
    (check,) = verify_run(tmp_path)
    assert not check.identical and check.termination == "model_error"
    d = check.divergence
    assert (d["turn"], d["tool"], d["call_id"]) == (2, "tickets_add_comment", "call_2")
    assert d["replayed"]["comment_id"] == "c_changed"
    assert d["recorded"]["comment_id"] == next(
        e["result"]["comment_id"] for e in recorded["events"] if e.get("id") == "call_2"
        and e["type"] == "result")
    record = run_episode(CELLS[0], ReplayAdapter(str(tmp_path)))
    reason = record["outcome"]["termination_reason"]
    assert reason.startswith("replay diverged at turn 2: tickets_add_comment (call_2) returned")
    assert "c_changed" in reason


def test_replay_of_a_provider_episode_keeps_its_usage_and_cost(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    prices = tmp_path / "p.toml"
    prices.write_text('["openai/gpt-test"]\ninput = 1.0\noutput = 2.0\n')
    with ThreadedGateway() as gw:
        recorded = run_episode(CELLS[1], Bridge(gw, "openai", {"prices": str(prices)},
                                                backing=Metered, cache=None))
    assert recorded["outcome"]["cost_usd"] > 0
    (check,) = verify_run(write_run(tmp_path, [recorded]))
    assert check.identical
    assert plain(run_episode(CELLS[1], ReplayAdapter(str(tmp_path)))) == plain(recorded)


def test_an_episode_not_in_the_run_is_a_clear_model_error(tmp_path) -> None:
    write_run(tmp_path, [run_episode(CELLS[0])])
    record = run_episode(CELLS[1], ReplayAdapter(str(tmp_path)))
    assert record["outcome"]["termination"] == "model_error"
    assert "no recorded episode" in record["outcome"]["termination_reason"]
    with pytest.raises(UsageError, match="no episodes"):
        ReplayAdapter(str(tmp_path / "missing"))


def test_a_turn_the_log_cannot_reproduce_is_refused_not_guessed(tmp_path) -> None:
    refused = ToolCall(id="f1", name="finish", arguments={"status": "maybe", "summary": "?"})
    ok = ToolCall(id="f2", name="finish", arguments={"status": "completed", "summary": "done"})
    script = scripted(tmp_path / "script", [ModelTurn(tool_calls=[refused]),
                                            ModelTurn(tool_calls=[ok])])
    recorded = run_episode(CELLS[0], script)
    assert recorded["outcome"]["model_turns"] == 2
    write_run(tmp_path, [recorded])
    record = run_episode(CELLS[0], ReplayAdapter(str(tmp_path)))
    assert "cannot replay turn 1 exactly" in record["outcome"]["termination_reason"]
    assert len(load_records(tmp_path)) == 1


def test_a_changed_task_prompt_diverges_at_turn_one(tmp_path, monkeypatch) -> None:
    write_run(tmp_path, [run_episode(CELLS[0])])
    monkeypatch.setattr(Tickets, "mint", lambda self, prefix: f"{prefix}_changed")
    (check,) = verify_run(tmp_path)
    assert check.divergence["turn"] == 1
    assert check.divergence["detail"] == "the task prompt differs"
