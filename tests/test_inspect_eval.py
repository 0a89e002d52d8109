"""Must-show 1 of issue 16: LIMBO cells run as an Inspect task give the graded outcomes that
``limbo run`` gives on the same cells — with Inspect's own mock model scripted to make the
``policy/verify`` calls, and with ``policy/verify`` behind an OpenAI-compatible loopback server
reached by ``inspect eval`` on the command line through the ``inspect_ai`` entry point."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.inspect_models import policy_gateway, scripted_mock
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from limbo.cli import main
from limbo.inspect import log as inspect_log
from limbo.inspect.registry import TASKS
from limbo.store import iter_records

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
    _, records = verify_run
    logs = inspect_eval(TASKS["e1"](**PARAMS), model=scripted_mock(records),
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
