"""Observation equivalence: within a group, the agent cannot tell the modes apart.

For every template and focal write, a deterministic agent runs once in each mode of a group;
its view — every turn, call and result with its sim time, up to and including the result of
the focal write — must be byte-identical across the group. The hidden side must differ, or the
test would prove nothing: a check below makes sure each group really mixes different outcomes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from limbo.base.registry import lookup
from limbo.episode.run_one import run_episode
from limbo.sim.catalog import catalog, group_members
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

VISIBLE = ("turn", "call", "result")
POLICIES = ("policy/verify", "policy/blind", "policy/keyed")


def focal_cells() -> list[tuple[str, str]]:
    return [(tid, focal) for tid, t in templates().items() for focal in t.focal_writes]


def agent_view(record: dict[str, Any], focal: str) -> str:
    """The visible transcript up to and including the focal write's first result, as bytes."""
    out: list[dict[str, Any]] = []
    focal_call: str | None = None
    for event in record["events"]:
        if event["type"] not in VISIBLE:
            continue
        out.append(event)
        if event["type"] == "call" and event["tool"] == focal and focal_call is None:
            focal_call = event["id"]
        if event["type"] == "result" and event["id"] == focal_call:
            return json.dumps(out, sort_keys=True)
    raise AssertionError(f"the agent never got a result for {focal}")


def run(template: str, focal: str, mode: str, model: str, contract: str) -> dict[str, Any]:
    t = templates()[template]
    return run_episode(Cell(model=model, contract=contract, fault=mode, service=t.service,
                            template=template, focal_write=focal, instance=0, seed=0))


def applicable(group: str, focal: str, contract: str) -> list[str]:
    op = toolset(contract)[focal].op
    return [m for m in group_members()[group] if lookup("fault", m).applies(op)]


def test_the_three_groups_are_those_of_the_spec() -> None:
    assert group_members() == {
        "timeout": ["stale_readback", "timeout_late", "timeout_late_tail", "timeout_post",
                    "timeout_pre"],
        "server_error": ["http500_post", "http500_pre", "partial_batch"],
        "success": ["none", "phantom_success", "redelivery"],
    }
    assert catalog()["conn_reset_post"].group is None and catalog()["throttle_pre"].group is None


@pytest.mark.parametrize("contract", CONTRACTS)
@pytest.mark.parametrize("group", ["timeout", "server_error", "success"])
def test_agent_view_is_identical_across_a_group(group: str, contract: str) -> None:
    compared = 0
    for template, focal in focal_cells():
        modes = applicable(group, focal, contract)
        for model in POLICIES:
            views: dict[str, str] = {}
            hidden: set[str] = set()
            for mode in modes:
                record = run(template, focal, mode, model, contract)
                assert record["outcome"]["fault_fired"], (template, focal, mode)
                views[mode] = agent_view(record, focal)
                hidden.add(json.dumps([e["t"] for e in record["ledger"] if e["tool"] == focal]))
            reference = views[modes[0]]
            for mode, view in views.items():
                assert view == reference, f"{template}/{focal}/{model}: {mode} != {modes[0]}"
            # The modes do differ behind the curtain (so equal views are not a trivial pass).
            assert len(hidden) > 1, (template, focal, model, group)
            compared += len(modes)
    assert compared >= 2 * 2 * len(focal_cells())


def test_the_view_differs_between_groups() -> None:
    """The comparison can fail: a timeout and a 500 give different transcripts."""
    template, focal = "charge_invoice", "billing_create_charge"
    a = agent_view(run(template, focal, "timeout_pre", "policy/verify", "native"), focal)
    b = agent_view(run(template, focal, "http500_pre", "policy/verify", "native"), focal)
    assert a != b
