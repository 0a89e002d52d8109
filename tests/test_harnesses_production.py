"""Must-show 1 of the production harnesses: Codex CLI, Copilot CLI, Claude Code and hermes-agent,
the real pinned binaries, run complete episodes offline — tools from the sandbox's MCP server,
model from the gateway backed by a reference policy — and each episode's record equals the
minimal harness's for the same cell (outcome, ledger, report, events up to call ids).

Timeouts are real: the MCP server holds a timed-out call past the harness's own tool timeout,
so what reaches the model is the harness's own timeout sentence, never the sandbox's JSON."""

from __future__ import annotations

import json
import re

import pytest
from support.cells import cell_for
from support.harness_runs import PRODUCTION, require, run_all, without_ids

from limbo.base.registry import lookup
from limbo.episode.run_one import run_episode
from limbo.harnesses.tool_text import read_result

POLICIES = ("policy/verify", "policy/blind")
FAULTS = ("none", "timeout_post", "http500_post", "timeout_late", "redelivery")
CASES = [(h, p, f) for h in PRODUCTION for p in POLICIES for f in FAULTS]


def _cell(harness: str, policy: str, fault: str):
    return cell_for("charge_invoice", "billing_create_charge", harness=harness, model=policy,
                    fault=fault)


@pytest.fixture(scope="module")
def runs():
    available = [h for h in PRODUCTION if lookup("harness", h).availability()[0]]
    return run_all([_cell(h, p, f) for h, p, f in CASES if h in available])


@pytest.mark.parametrize(("harness", "policy", "fault"), CASES)
def test_a_harness_episode_records_what_the_minimal_loop_records(runs, harness, policy,
                                                                   fault) -> None:
    require(harness)
    cell = _cell(harness, policy, fault)
    record, _ = runs[cell.episode_id]
    reference = run_episode(cell.model_copy(update={"harness": "minimal"}))
    assert record["outcome"]["termination"] == "finished", record["outcome"]["termination_reason"]
    assert record["outcome"] == reference["outcome"]
    assert record["ledger"] == reference["ledger"] and record["report"] == reference["report"]
    assert without_ids(record["events"]) == without_ids(reference["events"])
    facts = record["runtime"]["harness"]
    assert facts["exit_code"] == 0 and facts["killed"] is None, facts["stderr_tail"]
    # every request was a model turn, but one: the closing answer after finish
    assert len(facts["gateway"]) == record["outcome"]["model_turns"] + 1


@pytest.mark.parametrize("harness", PRODUCTION)
def test_the_model_sees_the_harness_own_timeout_text(runs, harness) -> None:
    require(harness)
    _, seen = runs[_cell(harness, "policy/verify", "timeout_post").episode_id]
    first = seen.tool_texts[0]  # what the model was shown for the focal write
    patterns = lookup("harness", harness).timeout_texts
    assert any(re.search(p, first) for p in patterns), first
    assert '"ok"' not in first  # the sandbox's own answer never got through


@pytest.mark.parametrize("harness", PRODUCTION)
def test_the_model_sees_the_sandbox_error_in_the_harness_wrapping(runs, harness) -> None:
    require(harness)
    _, seen = runs[_cell(harness, "policy/verify", "http500_post").episode_id]
    first = seen.tool_texts[0]
    assert read_result(first)["error"]["kind"] == "server_error", first
    if harness != "claude-code":  # Claude Code hands the model the tool's text as it is
        with pytest.raises(json.JSONDecodeError):
            json.loads(first)  # wrapped, not the bare JSON the minimal loop shows



def test_a_harness_episode_is_reproducible(runs) -> None:
    """The same cell again gives the same record apart from ``runtime`` (where the harness's
    own event stream, with its wall times and ids, is kept)."""
    cells = [_cell(h, "policy/verify", "timeout_post") for h in PRODUCTION]
    for h in PRODUCTION:
        require(h)
    again = run_all(cells)
    for cell in cells:
        first, second = runs[cell.episode_id][0], again[cell.episode_id][0]
        assert {k: v for k, v in first.items() if k != "runtime"} == \
            {k: v for k, v in second.items() if k != "runtime"}
        assert first["runtime"]["harness"]["events"]  # its own stream is kept
