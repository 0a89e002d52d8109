"""The Inspect integration under bad input: broken logs, samples without a record, epochs,
unknown task parameters, a model that fails, malformed tool calls, Inspect's JSON log format."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput

from limbo.analysis.loader import load
from limbo.base.errors import UsageError
from limbo.cli import main
from limbo.episode.models import Message, ToolCall
from limbo.inspect.model import from_inspect, to_inspect
from limbo.inspect.registry import TASKS, grid
from limbo.inspect.replay import replay_model
from limbo.log import inspect_logs as inspect_log

SMALL = {"template": "charge_invoice", "fault": "timeout_post", "instances": 1}


@pytest.fixture(scope="module")
def verify(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("verify")
    assert main(["run", "e1", "--model", "policy/verify", "--template", "charge_invoice",
                 "--fault", "timeout_post", "--instances", "1", "--out", str(out),
                 "--quiet"]) == 0
    return out


def test_a_file_that_is_not_an_inspect_log_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "broken.eval"
    bad.write_bytes(b"\xff\xfe not a zip at all")
    assert main(["tables", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a readable Inspect log" in err and "Traceback" not in err


def test_a_limbo_jsonl_named_json_is_not_taken_for_an_inspect_log(verify: Path,
                                                                  tmp_path: Path) -> None:
    renamed = tmp_path / "records.json"
    renamed.write_bytes((verify / "episodes.jsonl").read_bytes())
    assert not inspect_log.is_inspect_log(renamed)
    assert len(load([renamed]).frame) == 2


def test_epochs_are_refused_and_samples_without_a_record_are_reported(verify: Path,
                                                                      tmp_path: Path) -> None:
    (log,) = inspect_eval(TASKS["e1"](**SMALL), model=replay_model(verify), epochs=2,
                          fail_on_error=False, log_dir=str(tmp_path), display="none")
    errors = [s.error.message for s in log.samples if s.error]
    assert len(errors) == 2 and all("-T repeats=K" in e for e in errors)
    loaded = load([Path(log.location)])
    assert len(loaded.frame) == 2  # the first epoch's episodes, each once
    missing = [p for p in loaded.problems if p.kind == "no record"]
    assert len(missing) == 2 and all("@epoch2" in p.where for p in missing)
    assert any("1 no record" in m or "2 no record" in m for m in loaded.messages())


def test_repeats_are_limbo_run_s_replicates(tmp_path: Path) -> None:
    """``-T repeats=3`` samples every cell three times as ``limbo run --repeats 3`` does: the
    same cells, replicates 0-2 (each its own sample and episode), all in the log's records."""
    run = tmp_path / "run"
    assert main(["run", "e1", "--model", "policy/verify", "--template", "charge_invoice",
                 "--fault", "timeout_post", "--instances", "1", "--repeats", "3", "--out",
                 str(run), "--quiet"]) == 0
    (log,) = inspect_eval(TASKS["e1"](**SMALL, repeats=3), model=replay_model(run),
                          log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and len(log.samples) == 6
    assert len({s.id for s in log.samples}) == 6

    def cells(records: list[dict]) -> list[dict]:
        return sorted(({k: v for k, v in r["cell"].items() if k != "model"} for r in records),
                      key=json.dumps)

    logged = [s.metadata["limbo_record"] for s in log.samples]
    ran = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert cells(logged) == cells(ran)
    assert sorted(c.get("replicate", 0) for c in cells(logged)) == [0, 0, 1, 1, 2, 2]
    assert len({r["episode_id"] for r in logged}) == 6
    assert [r["outcome"]["termination"] for r in logged] == ["finished"] * 6


def test_an_unrecorded_cell_ends_as_model_error_and_is_not_rated(verify: Path,
                                                                 tmp_path: Path) -> None:
    task = TASKS["e1"](template="charge_invoice", fault="timeout_post,http500_pre", instances=1)
    (log,) = inspect_eval(task, model=replay_model(verify), log_dir=str(tmp_path),
                          display="none")
    assert log.status == "success"
    by_fault: dict[str, list] = {}
    for sample in log.samples:
        record = sample.metadata["limbo_record"]
        by_fault.setdefault(record["cell"]["fault"], []).append((record, sample.scores["ledger"]))
    for record, score in by_fault["http500_pre"]:  # the run did not record these cells
        assert record["outcome"]["termination"] == "model_error"
        assert "recorded no" in record["outcome"]["termination_reason"]
        assert math.isnan(score.value["duplicate"])
    for record, score in by_fault["timeout_post"]:
        assert record["outcome"]["termination"] == "finished"
        assert score.value["exactly_once"] == 1.0
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert metrics["exactly_once"] == 1.0  # the errored half is left out, not counted as 0


def test_inspect_json_log_format_is_read_too(verify: Path, tmp_path: Path) -> None:
    (log,) = inspect_eval(TASKS["e1"](**SMALL), model=replay_model(verify), log_format="json",
                          log_dir=str(tmp_path), display="none")
    path = Path(log.location)
    assert path.suffix == ".json" and inspect_log.is_inspect_log(path)
    assert len(load([path]).frame) == 2


@pytest.mark.parametrize("params, message", [
    ({"bogus": "x"}, "unknown task parameter"),
    ({"grid": "no-such-grid"}, "no grid"),
    ({"fault": "sometimes"}, "unknown fault"),
    ({"fault": " , "}, "names no level"),
    ({"limit": -1}, "at least 0"),
])
def test_bad_task_parameters_are_usage_errors(params: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        grid(**params)


def test_limit_and_factor_lists() -> None:
    task = TASKS["e1"](template=["charge_invoice"], fault="timeout_post, http500_pre", limit=3)
    ids = [s.id for s in task.dataset]
    assert len(ids) == 3 == len(set(ids))
    assert all(i.startswith("charge_invoice/") for i in ids)


def test_conversation_round_trip_and_a_malformed_call() -> None:
    calls = [ToolCall(id="c1", name="billing_create_charge", arguments={"amount_cents": 5}),
             ToolCall(id="c2", name="billing_create_charge", arguments='{"amount_cents": 5,,')]
    assistant = to_inspect(Message(role="assistant", content="", tool_calls=calls))
    assert assistant.tool_calls[0].arguments == {"amount_cents": 5}
    assert assistant.tool_calls[1].arguments == {} and assistant.tool_calls[1].parse_error
    tool = to_inspect(Message(role="tool", content=json.dumps({"ok": True}), tool_call_id="c1",
                              name="billing_create_charge"))
    assert tool.tool_call_id == "c1" and tool.function == "billing_create_charge"
    output = ModelOutput.for_tool_call("mockllm/model", "wait", {"seconds": 3},
                                       tool_call_id="w1")
    output.choices[0].message.tool_calls[0].parse_error = "Expecting value"
    turn = from_inspect(output)
    # unparseable arguments stay raw text, which the boundary refuses as it would any such call
    assert turn.tool_calls[0].arguments == "Expecting value"
    assert turn.usage.cost_usd is None  # unpriced, never free
