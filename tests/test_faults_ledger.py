"""What each mode does to the ledger, with sim times, for every focal write and both contracts.

The agent is ``policy/give-up``: it stops at the first failure, so the ledger of the focal tool
shows the fault's doing and nothing else. t0 is when the agent issued the focal write; a normal
write reaches the service at t0 + 0.5 and answers at t0 + 1.0.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from limbo.base.registry import lookup
from limbo.base.rng import generator
from limbo.episode.run_one import run_episode
from limbo.faults import tail
from limbo.sim.catalog import catalog
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import fill, templates
from limbo.sim.tools import toolset
from limbo.sim.world import World

ARRIVE = 0.5
NOT_EXECUTED = ("timeout_pre", "http500_pre", "throttle_pre", "phantom_success")
AT_ONCE = ("none", "timeout_post", "http500_post", "conn_reset_post", "stale_readback")


def cells(mode: str) -> list[Cell]:
    out = []
    for contract in CONTRACTS:
        tools = toolset(contract)
        for tid, t in templates().items():
            for focal in t.focal_writes:
                if lookup("fault", mode).applies(tools[focal].op):
                    out.append(Cell(model="policy/give-up", contract=contract, fault=mode,
                                    service=t.service, template=tid, focal_write=focal, seed=3))
    return out


def focal_view(record: dict[str, Any], focal: str) -> tuple[float, dict[str, Any], list[dict]]:
    """(t0, the focal call's args, the focal tool's ledger effects)."""
    call = next(e for e in record["events"] if e["type"] == "call" and e["tool"] == focal)
    return call["t"], call["args"], [e for e in record["ledger"] if e["tool"] == focal]


def units(args: dict[str, Any]) -> int:
    """How many effects one full delivery of the focal write makes (rows of a batch)."""
    return len(args["rows"]) if "rows" in args else 1


def fault_detail(record: dict[str, Any]) -> dict[str, Any]:
    return next(e["detail"] for e in record["events"] if e["type"] == "fault")


def arrivals(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record["events"] if e["type"] == "arrival"]


@pytest.mark.parametrize("mode", sorted(catalog()))
def test_ledger_of_each_mode(mode: str) -> None:
    checked = 0
    for cell in cells(mode):
        record = run_episode(cell)
        assert record["outcome"]["fault_fired"]
        t0, args, effects = focal_view(record, cell.focal_write)
        times = [e["t"] for e in effects]
        n = units(args)
        where = f"{mode} {cell.contract} {cell.template}/{cell.focal_write}"
        if mode in NOT_EXECUTED:
            assert effects == [], where
        elif mode in AT_ONCE:
            assert times == [t0 + ARRIVE] * n, where
        elif mode == "timeout_late":
            assert times == [t0 + 120.0] * n, where
            assert fault_detail(record)["lands_at"] == t0 + 120.0
        elif mode == "timeout_late_tail":
            delta = fault_detail(record)["delay_after_timeout_s"]
            assert 40.0 <= delta <= 7200.0
            # drawn from the fault's own generator, as the first and only draw
            assert delta == tail.draw(generator(cell.seed, "fault"))
            assert times == [t0 + 30.0 + delta] * n, where
        elif mode == "partial_batch":
            k, total = fault_detail(record)["k"], fault_detail(record)["n"]
            assert total == n and 1 <= k < n, where
            assert times == [t0 + ARRIVE] * k
            assert [e["args"]["row"] for e in effects] == args["rows"][:k]
        elif mode == "redelivery":
            assert_redelivery(record, cell, t0, effects, n)
        else:
            raise AssertionError(f"no expectation for mode {mode}")
        if mode in ("timeout_late", "timeout_late_tail"):
            assert [(a["attempt"], a["outcome"]) for a in arrivals(record)] == [
                ("original", "committed")]
        checked += 1
    assert checked >= 2 if mode == "partial_batch" else checked >= 30


def assert_redelivery(record: dict[str, Any], cell: Cell, t0: float, effects: list[dict],
                      n: int) -> None:
    op = toolset(cell.contract)[cell.focal_write].op
    natural = op.idempotency in ("natural", "conditional")
    [copy] = arrivals(record)
    assert copy["attempt"] == "redelivered" and copy["t"] == t0 + ARRIVE + 2.0
    if natural:  # a repeat refund / status change / identical upsert changes nothing
        assert [e["t"] for e in effects] == [t0 + ARRIVE]
        assert copy["outcome"] == "no_effect"
        return
    assert [e["t"] for e in effects] == [t0 + ARRIVE] * n + [t0 + ARRIVE + 2.0] * n
    assert [e["attempt"] for e in effects] == ["original"] * n + ["redelivered"] * n
    assert len({e["request_id"] for e in effects}) == 1
    assert copy["outcome"] == "committed"


@pytest.mark.parametrize("contract", CONTRACTS)
def test_redelivery_with_an_honoured_key_commits_once(contract: str) -> None:
    """``policy/keyed`` sends a key up front; where the contract honours it the copy is a
    replay. Under keys-everywhere that is every write; natively only charges and mastodon."""
    seen_honoured = 0
    for cell in cells("redelivery"):
        if cell.contract != contract:
            continue
        cell = cell.model_copy(update={"model": "policy/keyed"})
        record = run_episode(cell)
        t0, args, effects = focal_view(record, cell.focal_write)
        op = toolset(contract)[cell.focal_write].op
        plain = {k: v for k, v in args.items() if k != "idempotency_key"}
        if not op.honours_key(contract, plain):
            continue
        seen_honoured += 1
        assert [e["t"] for e in effects] == [t0 + ARRIVE] * units(args), cell.template
        assert arrivals(record)[0]["outcome"] == "replayed"
        assert {e["key"] for e in effects} == {args["idempotency_key"]}
        assert record["outcome"]["exactly_once"]
    assert seen_honoured >= (30 if contract == "keys-everywhere" else 2)


def _world(mode: str, template: str = "charge_invoice", focal: str = "billing_create_charge",
           contract: str = "native") -> tuple[World, dict[str, Any]]:
    t = templates()[template]
    world = World.of(Cell(contract=contract, fault=mode, service=t.service, template=template,
                       focal_write=focal))
    step = next(s for s in t.steps if s.tool == focal)
    return world, fill(step.args, world.vars)


@pytest.mark.parametrize("mode", ["timeout_late", "timeout_late_tail", "redelivery"])
def test_inflight_lists_a_delivery_until_it_lands(mode: str) -> None:
    world, args = _world(mode)
    world.boundary.call("billing_create_charge", args)
    [entry] = world.inflight
    assert set(entry) == {"request_id", "tool", "args", "key", "lands_at"}
    assert entry["tool"] == "billing_create_charge" and entry["args"] == args
    assert entry["lands_at"] > world.now
    assert len(world.ledger) == (1 if mode == "redelivery" else 0)  # the original, or nothing
    world.settle(world.cell.limits.settle_s)
    assert world.inflight == []
    assert world.ledger[-1]["t"] == entry["lands_at"]


def test_a_late_commit_lands_after_the_agent_has_finished() -> None:
    """The agent (give-up) stops at the timeout; settling still lands the original."""
    t = templates()["deploy_release"]
    record = run_episode(Cell(model="policy/give-up", fault="timeout_late", service=t.service,
                              template="deploy_release", focal_write="deploy_trigger"))
    finish = next(e for e in record["events"] if e["type"] == "finish")
    [effect] = record["ledger"]
    assert effect["t"] > finish["t"]
    assert record["outcome"]["task_success"] is False  # the comment step never ran
    assert record["outcome"]["commits"]["run"] == 1


def test_a_late_original_with_a_reused_key_and_other_arguments_is_rejected() -> None:
    world, args = _world("timeout_late")
    key = "k-reused"
    first = world.boundary.call("billing_create_charge", {**args, "idempotency_key": key})
    assert first["error"]["kind"] == "timeout"
    changed = {**args, "description": args["description"] + "-b", "idempotency_key": key}
    assert world.boundary.call("billing_create_charge", changed)["ok"]
    world.settle(world.cell.limits.settle_s)
    [arrival] = [e for e in world.log.events if e["type"] == "arrival"]
    assert arrival["outcome"] == "rejected"
    assert len(world.ledger) == 1


def test_stale_readback_hides_the_commit_from_the_next_read_only() -> None:
    world, args = _world("stale_readback")
    assert world.boundary.call("billing_create_charge", args)["error"]["kind"] == "timeout"
    assert len(world.ledger) == 1  # it did commit, at t0 + 0.5
    query = {"customer_id": args["customer_id"], "limit": 50}
    # a read on another service does not consume the stale read
    assert world.boundary.call("tickets_list_recent", {"limit": 5})["ok"]
    assert world.boundary.call("billing_list_charges", query)["items"] == []
    [item] = world.boundary.call("billing_list_charges", query)["items"]
    assert item["charge_id"] == world.ledger[0]["object_id"]


def test_phantom_success_answers_what_the_service_would_have() -> None:
    ack = {}
    for mode in ("none", "phantom_success"):
        world, args = _world(mode)
        ack[mode] = world.boundary.call("billing_create_charge", args)
        assert len(world.ledger) == (1 if mode == "none" else 0)
    assert ack["none"] == ack["phantom_success"] and ack["none"]["ok"]


def test_timing_of_the_answers() -> None:
    """When each mode answers, relative to the focal call (all at the client timeout or the
    normal round trip)."""
    expected = {m: 30.0 for m in ("timeout_pre", "timeout_post", "timeout_late",
                                  "timeout_late_tail", "stale_readback")}
    expected.update({m: 1.0 for m in ("none", "http500_pre", "http500_post", "conn_reset_post",
                                      "throttle_pre", "redelivery", "phantom_success")})
    kinds = {"http500_pre": "server_error", "http500_post": "server_error",
             "conn_reset_post": "connection_reset", "throttle_pre": "rate_limited"}
    for mode, dt in expected.items():
        world, args = _world(mode)
        t0 = world.now
        result = world.boundary.call("billing_create_charge", args)
        assert world.now - t0 == dt, mode
        kind = None if result["ok"] else result["error"]["kind"]
        assert kind == kinds.get(mode, "timeout" if dt == 30.0 else None), mode
        if mode == "throttle_pre":
            assert result["error"]["retry_after_s"] == 20 and result["error"]["status"] == 429


@pytest.mark.parametrize("mode", sorted(catalog()))
def test_each_mode_is_deterministic(mode: str) -> None:
    """Same cell and seed, same record (but for the wall-clock ``runtime``)."""
    cell = next(c for c in cells(mode) if c.contract == "native")
    cell = cell.model_copy(update={"model": "policy/verify"})
    a, b = (run_episode(cell) for _ in range(2))
    a.pop("runtime")
    b.pop("runtime")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
