"""The contract tests' sample writes cover every write tool and each commits exactly its
effects (one per unit of a batch)."""

from __future__ import annotations

import pytest
from support.worlds import deliver, make_world, sample_writes

from limbo.sim.service import CONTRACTS
from limbo.sim.tools import toolset


@pytest.mark.parametrize("contract", CONTRACTS)
def test_sample_writes_cover_every_write_tool(contract: str) -> None:
    world = make_world(contract)
    writes = {name for name, spec in toolset(contract).items() if spec.kind == "write"}
    assert set(sample_writes(world)) == writes


@pytest.mark.parametrize("contract", CONTRACTS)
def test_each_sample_write_commits_exactly_one_effect(contract: str) -> None:
    world = make_world(contract)
    for tool, args in sample_writes(world).items():
        before = len(world.ledger)
        result = deliver(world, tool, args)
        assert result["ok"], (tool, result)
        batch = world.tools[tool].op.batch
        units = len(batch.items(args)) if batch is not None else 1
        assert len(world.ledger) - before == units, tool
        assert {e["tool"] for e in world.ledger[before:]} == {tool}
