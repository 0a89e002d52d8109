"""Must-show 2 of the production harnesses: with the guard in the MCP server's tool layer,
``policy/blind`` (which re-issues a write after every ambiguous failure) duplicates nothing under
any harness where a read-back resolves the fault, and nothing at all on any fault once every write
takes a key (keys-everywhere) — the guard then hands each retry the key of the first attempt.

Without the guard the same cells duplicate (checked on the minimal loop, where the record is the
same as under every harness), so the zero is the guard's doing, not the cells'."""

from __future__ import annotations

import pytest
from support.cells import cell_for
from support.harness_runs import PRODUCTION, require, run_all, without_ids

from limbo.base.registry import entries, lookup
from limbo.episode.run_one import run_episode

RESOLVES = ("timeout_post", "http500_post", "conn_reset_post", "partial_batch")
ALL_FAULTS = tuple(entries("fault"))
CASES = ([(h, "native", f) for h in PRODUCTION for f in RESOLVES]
         + [(h, "keys-everywhere", f) for h in PRODUCTION for f in ALL_FAULTS])


def _cell(harness: str, contract: str, fault: str, condition: str = "guard"):
    template = "import_batch" if fault == "partial_batch" else "charge_invoice"
    focal = "data_insert_many" if fault == "partial_batch" else "billing_create_charge"
    return cell_for(template, focal, harness=harness, model="policy/blind", contract=contract,
                    fault=fault, condition=condition)


@pytest.fixture(scope="module")
def runs():
    available = [h for h in PRODUCTION if lookup("harness", h).availability()[0]]
    return run_all([_cell(*case) for case in CASES if case[0] in available])


@pytest.mark.parametrize(("harness", "contract", "fault"), CASES)
def test_the_guard_in_the_mcp_server_leaves_no_duplicate(runs, harness, contract, fault) -> None:
    require(harness)
    cell = _cell(harness, contract, fault)
    record, _ = runs[cell.episode_id]
    outcome = record["outcome"]
    assert outcome["termination"] == "finished", outcome["termination_reason"]
    assert not outcome["duplicate"] and outcome["exactly_once"] == outcome["task_success"]
    assert any(e["type"] == "guard" for e in record["events"])
    reference = run_episode(cell.model_copy(update={"harness": "minimal"}))
    assert outcome == reference["outcome"]
    assert without_ids(record["events"]) == without_ids(reference["events"])


@pytest.mark.parametrize("fault", RESOLVES)
def test_without_the_guard_the_same_cells_duplicate(fault) -> None:
    """The counterfactual, on the minimal loop (whose records the harnesses reproduce)."""
    vanilla = run_episode(_cell("minimal", "native", fault, condition="vanilla"))
    assert vanilla["outcome"]["duplicate"]


def test_keys_everywhere_with_the_guard_is_exactly_once_on_every_fault(runs) -> None:
    """Beyond no duplicate: every effect lands once — except under a phantom success, where
    nothing committed and blind never looks (no tool layer can know without reading)."""
    for harness in PRODUCTION:
        require(harness)
        for fault in ALL_FAULTS:
            outcome = runs[_cell(harness, "keys-everywhere", fault).episode_id][0]["outcome"]
            assert outcome["exactly_once"] == (fault != "phantom_success"), (harness, fault)
