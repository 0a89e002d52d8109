"""Pinned behaviour (documented in docs/conditions.md, "The guard in LIMBO"): under the guard, a
policy that checks its successes cannot recover from ``phantom_success``. The guard recorded
the phantom success under the call's key, so the corrective re-issue — the same key and the
same arguments — is answered by a step-4 replay and never reaches the service."""

from __future__ import annotations

from typing import Any

import pytest
from support.cells import cell_for

from limbo.episode.run_one import run_episode

POLICIES = ("policy/verify?check_success=true", "policy/keyed?check_success=true")
CASES = [("charge_invoice", "billing_create_charge"), ("record_signup", "data_insert")]


def _focal_commits(record: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [e for e in record["ledger"] if e["tool"] == tool]


@pytest.mark.parametrize("model", POLICIES)
@pytest.mark.parametrize(("template", "tool"), CASES)
def test_the_guard_replays_the_phantom_success_to_the_corrective_reissue(
        model: str, template: str, tool: str) -> None:
    guarded = run_episode(cell_for(template, tool, model=model, fault="phantom_success",
                                   condition="guard"))
    calls = [e for e in guarded["events"] if e["type"] == "call" and e["tool"] == tool]
    assert len(calls) == 2  # the write, then the re-issue after an empty read-back
    replays = [e for e in guarded["events"] if e["type"] == "guard" and e["tool"] == tool
               and e["step"] == 4 and e["action"] == "replay"]
    assert len(replays) == 1 and replays[0]["t"] == calls[1]["t"]
    assert _focal_commits(guarded, tool) == []
    assert guarded["outcome"]["task_success"] is False

    # without the guard the same policy sees the empty read-back and recovers
    plain = run_episode(cell_for(template, tool, model=model, fault="phantom_success"))
    assert len(_focal_commits(plain, tool)) == 1
    assert plain["outcome"]["task_success"] and plain["outcome"]["exactly_once"]
