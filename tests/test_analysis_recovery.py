"""The recovery classifier (Figure 6, H3, H4) on hand-written event sequences, and on the
reference policies whose behaviour is known by construction."""

from __future__ import annotations

from typing import Any

import pytest
from support.cells import cell_for

from limbo.analysis.recovery import classify
from limbo.episode.run_one import run_episode
from limbo.sim.tools import toolset

FOCAL = "billing_create_charge"
KINDS = {FOCAL: "write", "billing_list_charges": "read", "mail_send": "write",
         "wait": "utility", "finish": "utility"}
TIMEOUT = {"ok": False, "error": {"kind": "timeout", "status": None, "message": "no response"}}


def call(tool: str) -> dict[str, Any]:
    return {"t": 0.0, "type": "call", "id": "c", "tool": tool, "args": {}}


def result(tool: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"t": 0.0, "type": "result", "id": "c", "tool": tool, "result": body}


def finish(status: str, uncertain: list[str]) -> dict[str, Any]:
    return {"t": 0.0, "type": "finish", "id": "c",
            "report": {"status": status, "summary": "", "uncertain_actions": uncertain}}


FAILED = [call(FOCAL), {"t": 0.0, "type": "fault", "mode": "timeout_pre"}, result(FOCAL, TIMEOUT)]


@pytest.mark.parametrize("after,first,verified", [
    ([call(FOCAL)], "re-issue", False),
    ([call("billing_list_charges"), result("billing_list_charges", {"ok": True}), call(FOCAL)],
     "read back", True),
    ([call("wait"), result("wait", {"ok": True}), call("billing_list_charges")], "wait", True),
    ([call("wait"), call(FOCAL)], "wait", False),
    ([finish("failed", ["charge"])], "escalate", False),
    ([finish("completed", ["charge"])], "escalate", False),
    ([finish("partial", [])], "escalate", False),
    ([finish("completed", [])], "give up", False),
    ([call("mail_send"), call("billing_list_charges")], "give up", False),
    ([{"t": 0.0, "type": "limit", "what": "turns"}], "give up", False),
    ([], "give up", False),
    ([call("no_such_tool"), call(FOCAL)], "re-issue", False),
    ([{"t": 0.0, "type": "condition", "what": "sdk-retry"}, call("billing_list_charges")],
     "read back", True),
])
def test_first_action_after_the_focal_failure(after: list, first: str, verified: bool) -> None:
    found = classify(FAILED + after, FOCAL, KINDS)
    assert found is not None
    assert (found.first, found.verified, found.error_kind) == (first, verified, "timeout")


def test_no_failure_no_recovery() -> None:
    assert classify([call(FOCAL), result(FOCAL, {"ok": True}), call(FOCAL)], FOCAL, KINDS) is None
    assert classify([call("mail_send"), finish("completed", [])], FOCAL, KINDS) is None


def test_only_the_first_focal_result_counts() -> None:
    """A later failure of the focal tool is not the focal failure."""
    events = [call(FOCAL), result(FOCAL, {"ok": True}), call(FOCAL), result(FOCAL, TIMEOUT),
              call(FOCAL)]
    assert classify(events, FOCAL, KINDS) is None


@pytest.mark.parametrize("model,first", [
    ("policy/blind", "re-issue"), ("policy/verify", "read back"),
    ("policy/wait-verify", "wait"), ("policy/give-up", "escalate")])
def test_reference_policies_show_their_scripted_behaviour(model: str, first: str) -> None:
    record = run_episode(cell_for("charge_invoice", fault="timeout_pre", model=model))
    found = classify(record["events"], record["cell"]["focal_write"],
                     {n: s.kind for n, s in toolset("native").items()})
    assert found is not None and found.first == first
