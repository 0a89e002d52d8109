"""Must-show 4 of world files: a world file's tools run under a production harness — the real,
pinned Claude Code CLI, offline — through the sandbox's MCP server, with the model from the
gateway backed by a reference policy; each episode records what the minimal loop records for
the same cell (outcome, ledger, report, events up to call ids). Needs the harness installed
(LIMBO_HARNESS_DIR=/work/main/.harnesses here; `make test` installs it on CI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.harness_runs import require, run_all, without_ids

from limbo.episode.run_one import run_episode
from limbo.harnesses.tool_text import read_result
from limbo.sim.cell import Cell
from limbo.sim.worldfile.kit import load_world

SHOP = Path(__file__).resolve().parents[1] / "examples" / "worlds" / "shop.toml"
HARNESS = "claude-code"
CASES = [("policy/verify", "none", "shop_order_sms", "shop_create_order"),
         ("policy/verify", "timeout_post", "shop_order_sms", "shop_create_order"),
         ("policy/blind", "http500_post", "shop_refund_email", "notify_send_email"),
         ("policy/verify", "partial_batch", "shop_add_lines", "shop_add_lines")]


def _cell(model: str, fault: str, template: str, focal: str, harness: str = HARNESS) -> Cell:
    return Cell(model=model, harness=harness, fault=fault, service=template.split("_")[0],
                template=template, focal_write=focal, world=load_world(SHOP).identity)


@pytest.fixture(scope="module")
def runs():
    require(HARNESS)
    return run_all([_cell(*case) for case in CASES])


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{c[3]}" for c in CASES])
def test_a_world_episode_under_the_harness_records_what_the_minimal_loop_records(
        runs, case: tuple[str, str, str, str]) -> None:
    cell = _cell(*case)
    record, seen = runs[cell.episode_id]
    reference = run_episode(_cell(*case, harness="minimal"))
    assert record["outcome"]["termination"] == "finished", record["outcome"]
    assert record["outcome"] == reference["outcome"]
    assert record["ledger"] == reference["ledger"] and record["report"] == reference["report"]
    assert without_ids(record["events"]) == without_ids(reference["events"])
    assert {e["tool"] for e in record["ledger"]} <= {"shop_create_order", "shop_refund_order",
                                                     "shop_add_lines", "notify_send_email",
                                                     "notify_send_sms"}
    facts = record["runtime"]["harness"]
    assert facts["exit_code"] == 0 and facts["killed"] is None, facts["stderr_tail"]
    if case[1] == "partial_batch":  # the harness showed the model the sandbox's 500
        assert read_result(seen.tool_texts[0])["error"]["kind"] == "server_error"
        assert record["outcome"]["exactly_once"]  # verify re-sent only the missing lines
