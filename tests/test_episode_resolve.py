"""An episode resolves the names its cell holds once, up front, and its world resolves nothing.

The registry is asked for the cell's condition, harness, fault mode and model provider once
each, by the episode runner, before anything is built; the world is built from the resolved parts, so a fault
mode class handed to it runs even when no registry knows its name.
"""

from __future__ import annotations

from typing import Any

import pytest

import limbo.episode.models as models
import limbo.episode.run_one as run_one
from limbo.base.errors import UsageError
from limbo.base.registry import lookup
from limbo.episode.run_one import run_episode
from limbo.sim.cell import Cell
from limbo.sim.parts import parts
from limbo.sim.world import World

CELL = Cell(model="policy/blind", fault="timeout_post", service="billing",
            template="charge_invoice", focal_write="billing_create_charge")


def test_the_episode_asks_the_registry_once_per_name_before_the_world_and_the_record_is_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[Any] = []

    def counted(kind: Any, name: str) -> Any:
        steps.append((kind, name))
        return lookup(kind, name)

    def built(cell: Cell, found: Any) -> World:
        steps.append("world")
        return World(cell, found)

    plain = run_episode(CELL)
    monkeypatch.setattr(run_one, "lookup", counted)
    monkeypatch.setattr(models, "lookup", counted)
    monkeypatch.setattr(run_one, "World", built)
    counted_run = run_episode(CELL)
    assert steps == [("condition", "vanilla"), ("harness", "minimal"), ("fault", "timeout_post"),
                     ("model", "policy"), "world"]
    assert {**counted_run, "runtime": None} == {**plain, "runtime": None}
    assert counted_run["outcome"]["fault_fired"] is True


def test_an_unknown_provider_stops_the_episode_before_its_world_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*_: Any) -> World:
        raise AssertionError("the world was built")

    monkeypatch.setattr(run_one, "World", never)
    with pytest.raises(UsageError, match="no-such-provider"):
        run_episode(CELL.model_copy(update={"model": "no-such-provider/m"}))


def test_a_world_runs_a_fault_mode_no_registry_knows() -> None:
    registered = lookup("fault", "timeout_post")
    unnamed = type("Unregistered", (registered,), {})  # never passed to @fault
    cell = CELL.model_copy(update={"fault": "no-such-mode"})
    with pytest.raises(Exception, match="no-such-mode"):
        World.of(cell)
    world = World(cell, parts(cell, unnamed))
    v = world.opening().vars
    result = world.call("billing_create_charge", {
        "customer_id": v["customer"], "amount_cents": v["amount"], "currency": v["currency"],
        "description": v["invoice"]})
    world.settle(cell.limits.settle_s)
    facts = world.facts()
    assert type(world.fault) is unnamed
    assert result["ok"] is False and result["error"]["kind"] == "timeout"
    assert facts.fault_fired is True
    assert [e["tool"] for e in facts.ledger] == ["billing_create_charge"]  # it committed
