"""Must-show 1 of issue 16: LIMBO cells run as an Inspect task give the graded outcomes that
``limbo run`` gives on the same cells — with Inspect's own mock model scripted to make the
``policy/verify`` calls, and with ``policy/verify`` behind an OpenAI-compatible loopback server
reached by ``inspect eval`` on the command line through the ``inspect_ai`` entry point."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log
from support.inspect_models import policy_gateway

from limbo.base.errors import UsageError
from limbo.cli import main
from limbo.inspect.registry import TASKS
from limbo.inspect.replay import replay_model
from limbo.log import inspect_logs as inspect_log
from limbo.log.store import iter_records

TEMPLATES = "charge_invoice,import_batch"
FAULTS = "timeout_post,http500_pre,partial_batch,timeout_late,redelivery"
PARAMS = {"template": TEMPLATES, "fault": FAULTS, "instances": 1}
GRADED = ("fault_fired", "commits", "duplicate", "missing", "spurious", "compensated",
          "task_success", "exactly_once", "report_status", "claimed_clean", "overclaim",
          "focal_write_class", "agent_time_s", "tool_calls", "model_turns", "termination")
INSPECT = str(Path(sys.executable).with_name("inspect"))


def limbo_run(out: Path, model: str, *extra: str) -> list[dict[str, Any]]:
    argv = ["run", "e1", "--model", model, "--instances", "1", "--out", str(out), "--quiet"]
    for flag, values in (("--template", TEMPLATES), ("--fault", FAULTS)):
        for value in values.split(","):
            argv += [flag, value]
    assert main([*argv, *extra]) == 0
    return list(iter_records(out))


@pytest.fixture(scope="module")
def verify_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("verify")
    return out, limbo_run(out, "policy/verify")


def by_cell(records: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Outcomes keyed by every cell field but the model."""
    return {tuple(v for k, v in sorted(r["cell"].items()) if k != "model"):
            {k: r["outcome"][k] for k in GRADED} for r in records}


def ledger_effects(records: list[dict[str, Any]]) -> dict[tuple, list[tuple]]:
    return {tuple(v for k, v in sorted(r["cell"].items()) if k != "model"):
            [(e["tool"], json.dumps(e["args"], sort_keys=True), e.get("attempt"))
             for e in r["ledger"]] for r in records}


@pytest.fixture(scope="module")
def mock_log(verify_run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir, _ = verify_run
    logs = inspect_eval(TASKS["e1"](**PARAMS), model=replay_model(run_dir),
                        log_dir=str(tmp_path_factory.mktemp("inspect-mock")), display="none")
    assert logs[0].status == "success", logs[0].error
    return Path(logs[0].location)


def test_mock_model_scripted_as_verify_matches_limbo_run(verify_run, mock_log) -> None:
    _, records = verify_run
    found = list(inspect_log.records(mock_log))
    assert len(found) == len(records) == 17
    assert {r["cell"]["model"] for r in found} == {"inspect/mockllm/model"}
    assert by_cell(found) == by_cell(records)
    assert ledger_effects(found) == ledger_effects(records)
    fired = [r for r in records if r["outcome"]["fault_fired"]]
    assert fired and any(r["outcome"]["duplicate"] for r in fired)  # redelivery: verify can't see it
    assert any(r["outcome"]["exactly_once"] for r in fired)


def test_scorer_metrics_are_the_rates_of_fired_episodes(verify_run, mock_log) -> None:
    _, records = verify_run
    log = read_eval_log(str(mock_log))
    metrics = {s.name: s.metrics["mean"].value for s in log.results.scores}
    fired = [r["outcome"] for r in records if r["outcome"]["fault_fired"]]
    for name in ("duplicate", "missing", "task_success", "exactly_once", "overclaim"):
        assert math.isclose(metrics[name], sum(o[name] for o in fired) / len(fired)), name
    assert math.isclose(metrics["fault_fired"], len(fired) / len(records))
    sample = log.samples[0]
    assert sample.scores["ledger"].metadata["episode_id"] == sample.metadata["limbo_record"][
        "episode_id"]
    # the conversation is mirrored into the sample, so Inspect's viewer shows it
    assert [m.role for m in sample.messages[:2]] == ["system", "user"]


def test_inspect_eval_cli_with_verify_behind_an_openai_compatible_server(
        verify_run, tmp_path: Path) -> None:
    _, records = verify_run
    samples = list(TASKS["e1"](**PARAMS).dataset)
    model = "openai-api/limbo/verify"
    with policy_gateway(samples, model) as gw:
        env = {**os.environ, "LIMBO_BASE_URL": f"{gw.url}/v1", "LIMBO_API_KEY": "sk-loopback"}
        argv = [INSPECT, "eval", "limbo/e1", "--model", model, "--log-dir", str(tmp_path),
                "--display", "none", "--max-connections", "4"]
        for name, value in PARAMS.items():
            argv += ["-T", f"{name}={value}"]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                              check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (log,) = tmp_path.glob("*.eval")
    found = list(inspect_log.records(log))
    assert {r["cell"]["model"] for r in found} == {"inspect/openai-api/limbo/verify"}
    assert by_cell(found) == by_cell(records)
    assert ledger_effects(found) == ledger_effects(records)


# -- must-show 2: the analysis reads the Inspect log as it reads a LIMBO run ----------------

def _tables(path: Path, out: Path) -> dict[str, str]:
    assert main(["tables", str(path), "--out", str(out), "--format", "md,csv"]) == 0
    return {p.name: p.read_text() for p in sorted(out.iterdir())}


def _numbers(text: str) -> list[str]:
    """A table without its provenance and caveat lines, and without Table 15's wall time (the
    record's ``runtime``: the one number that differs between two runs of the same cells)."""
    lines = [line for line in text.splitlines() if line.strip() and not any(
        mark in line for mark in ("Computed from:", "Reference policies", ",wall time (s),"))]
    if text.startswith("### Table 15"):
        lines = [line.rsplit(" | ", 1)[0] if line.startswith("| ") else line for line in lines]
    return lines


def test_limbo_tables_read_the_inspect_log_like_the_run(verify_run, mock_log,
                                                         tmp_path: Path) -> None:
    run_dir, _ = verify_run
    from_run = _tables(run_dir, tmp_path / "run")
    from_log = _tables(mock_log, tmp_path / "log")
    assert "table3.md" in from_run and len(from_run) > 4
    assert from_log.keys() == from_run.keys()
    for name, text in from_log.items():
        # Every number the same; what differs is where it came from (the run's manifest, the
        # log's header) and the caveat the run's reference-policy rows carry.
        same = text.replace("inspect/mockllm/model", "policy/verify").replace(
            "from inspect runs", "from grid runs")  # Table 0 says what wrote its episodes
        assert _numbers(same) == _numbers(from_run[name]), name
    assert f"e1 Inspect log {mock_log.name} (grid digest" in from_log["table3.md"]
    assert re.search(r"Computed from: e1 \[.*\] run \d", from_run["table3.md"]) and "Reference policies" in from_run["table3.md"]
    # the directory holding the log is read as a run directory too
    assert _tables(mock_log.parent, tmp_path / "dir") == from_log


def _compare(a: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["compare", str(a), str(b)]) == 0
    return capsys.readouterr().out.replace(str(b), "RUN_B")


def test_limbo_compare_reads_the_inspect_log_like_the_run(verify_run, mock_log, tmp_path: Path,
                                                          capsys) -> None:
    run_dir, _ = verify_run
    blind = tmp_path / "blind"
    limbo_run(blind, "policy/blind")
    capsys.readouterr()
    against_run = _compare(blind, run_dir, capsys)
    against_log = _compare(blind, mock_log, capsys)
    assert "| read-back resolves | dup |" in against_run
    assert _numbers(against_log) == _numbers(against_run)  # all but where each side came from
    assert f"RUN_B: e1 Inspect log {mock_log.name} (grid digest" in against_log
    # the log and the run it reproduces differ in nothing but the model
    same = _compare(run_dir, mock_log, capsys)
    assert "| overall | dup | 17 |" in same and "+0.0 [—] | 0 | 0 |" in same
    assert "-" not in "".join(line.split("|")[6] for line in same.splitlines()
                              if line.startswith("| ") and "dup" in line)


def test_a_run_directory_and_limbo_show_from_the_inspect_log(verify_run, mock_log,
                                                              tmp_path: Path, capsys) -> None:
    run_dir, records = verify_run
    out = tmp_path / "from-log"
    assert inspect_log.write_run(mock_log, out) == len(records)
    assert by_cell(list(iter_records(out))) == by_cell(records)
    with pytest.raises(UsageError, match="already holds records"):
        inspect_log.write_run(mock_log, out)  # never appended twice
    first = next(iter_records(out))
    capsys.readouterr()
    assert main(["show", str(mock_log), first["episode_id"]]) == 0
    assert first["cell"]["template"] in capsys.readouterr().out
    assert main(["show", str(mock_log), "ep-unknown"]) == 2


def test_limbo_run_with_an_inspect_model(verify_run, tmp_path: Path, monkeypatch) -> None:
    """The other direction: ``limbo run --model inspect/...`` builds the model with Inspect's
    ``get_model`` — here Inspect's OpenAI-compatible provider, reaching verify through the
    gateway — and gets verify's outcomes."""
    _, records = verify_run
    samples = list(TASKS["e1"](**PARAMS).dataset)
    with policy_gateway(samples, "openai-api/limbo/verify") as gw:
        monkeypatch.setenv("LIMBO_BASE_URL", f"{gw.url}/v1")
        monkeypatch.setenv("LIMBO_API_KEY", "sk-loopback")
        found = limbo_run(tmp_path, "inspect/openai-api/limbo/verify")
    assert {r["cell"]["model"] for r in found} == {"inspect/openai-api/limbo/verify"}
    assert by_cell(found) == by_cell(records)
