"""The qualitative picture the benchmark exists to show, over a grid of worlds.

Grid: every template × each of its focal writes × instances 0..2 × both contracts, in every
mode that applies. Then, with the reference policies:

* ``verify`` never duplicates when a strong read-back resolves the fault, but does when the
  read path is eventual or absent, and on every late commit (indeed on every mode no read-back
  can resolve: late commits, redelivery, a stale replica);
* ``keyed`` under keys-everywhere never duplicates, in any mode;
* ``blind`` duplicates on every mode that commits, unless the write cannot repeat
  (refund, status change, upsert);
* only ``verify?check_success=true`` catches ``phantom_success`` (where a read path exists).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from limbo.base.registry import lookup
from limbo.episode.run_one import run_episode
from limbo.sim.catalog import catalog
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

INSTANCES = (0, 1, 2)
RESOLVES = [m for m, i in catalog().items() if i.family == "read-back resolves"]
LATE = [m for m, i in catalog().items() if "late commit" in i.families]
CANNOT = [m for m, i in catalog().items() if "read-back cannot" in i.families]
NOT_EXECUTED = [m for m, i in catalog().items() if i.family == "not executed"]
COMMITTED = [m for m, i in catalog().items()
             if set(i.families) & {"read-back resolves", "late commit", "read-back cannot"}]


@dataclass(frozen=True)
class Focal:
    template: str
    tool: str
    contract: str
    instance: int
    read_path: str
    repeatable: bool
    """A repeat of this write is a second effect (not a natural or conditional write)."""


@cache
def grid() -> list[Focal]:
    """Every focal write of every template, per instance and contract, with its write class
    as the episode record states it."""
    out = []
    for contract in CONTRACTS:
        tools = toolset(contract)
        for tid, t in templates().items():
            for tool in t.focal_writes:
                for instance in INSTANCES:
                    rec = run(Focal(tid, tool, contract, instance, "", True), "none", "policy/give-up")
                    cls = rec["outcome"]["focal_write_class"]
                    out.append(Focal(tid, tool, contract, instance, cls["read_path"],
                                     tools[tool].op.idempotency not in ("natural", "conditional")))
    return out


def run(f: Focal, mode: str, model: str) -> dict[str, Any]:
    t = templates()[f.template]
    return run_episode(Cell(model=model, contract=f.contract, fault=mode, service=t.service,
                            template=f.template, focal_write=f.tool, instance=f.instance,
                            seed=f.instance))


def modes_for(f: Focal, modes: list[str]) -> list[str]:
    op = toolset(f.contract)[f.tool].op
    return [m for m in modes if lookup("fault", m).applies(op)]


def test_the_grid_covers_every_read_path_and_write_class() -> None:
    assert {f.read_path for f in grid()} == {"strong", "eventual", "none"}
    assert {f.repeatable for f in grid()} == {True, False}
    assert len(grid()) == 2 * len(INSTANCES) * sum(len(t.focal_writes)
                                                  for t in templates().values())
    assert RESOLVES and LATE and NOT_EXECUTED and "redelivery" in COMMITTED


@pytest.mark.parametrize("contract", CONTRACTS)
def test_verify_is_enough_only_where_a_strong_read_back_resolves(contract: str) -> None:
    seen = {"safe": 0, "eventual": 0, "cannot": 0}
    for f in grid():
        if f.contract != contract:
            continue
        for mode in modes_for(f, RESOLVES + CANNOT):
            out = run(f, mode, "policy/verify")["outcome"]
            where = (mode, f)
            if not f.repeatable:
                assert not out["duplicate"], where
            elif mode in CANNOT:  # late commits, the redelivered copy, the stale replica
                assert out["duplicate"], where
                seen["cannot"] += 1
            elif f.read_path == "strong":
                assert not out["duplicate"] and out["exactly_once"], where
                seen["safe"] += 1
            else:  # eventual or no read path: the read cannot show it yet
                assert out["duplicate"], where
                seen["eventual"] += 1
    assert min(seen.values()) > 0, seen


def test_keyed_under_keys_everywhere_never_duplicates() -> None:
    n = 0
    for f in grid():
        if f.contract != "keys-everywhere":
            continue
        for mode in modes_for(f, sorted(catalog())):
            out = run(f, mode, "policy/keyed")["outcome"]
            assert not out["duplicate"], (mode, f)
            n += 1
    assert n > 1000


@pytest.mark.parametrize("contract", CONTRACTS)
def test_blind_duplicates_on_every_committed_mode_unless_the_write_cannot_repeat(
        contract: str) -> None:
    for f in grid():
        if f.contract != contract:
            continue
        for mode in modes_for(f, COMMITTED):
            out = run(f, mode, "policy/blind")["outcome"]
            assert out["duplicate"] == f.repeatable, (mode, f)
        for mode in modes_for(f, NOT_EXECUTED):
            out = run(f, mode, "policy/blind")["outcome"]
            assert not out["duplicate"] and out["task_success"], (mode, f)


@pytest.mark.parametrize("contract", CONTRACTS)
def test_only_checking_successes_catches_a_phantom(contract: str) -> None:
    for f in grid():
        if f.contract != contract:
            continue
        plain = run(f, "phantom_success", "policy/verify")["outcome"]
        checking = run(f, "phantom_success", "policy/verify?check_success=true")["outcome"]
        assert plain["missing"] and not plain["task_success"], f
        assert plain["report_status"] == "completed"  # and it says all went well
        # Checking needs a read path: on x nothing can tell a phantom from a real post.
        assert checking["task_success"] == (f.read_path != "none"), f
        assert checking["exactly_once"] == (f.read_path != "none"), f
        # The check costs nothing when there is no fault: still exactly once.
        assert run(f, "none", "policy/verify?check_success=true")["outcome"]["exactly_once"], f
