"""The two contracts across all services: which tools take a key, which honour it, and what the
generated descriptions tell the agent about keys and read lags."""

from __future__ import annotations

import inspect
import re
import typing

import pytest
from pydantic import ValidationError
from support.worlds import deliver, make_world, sample_writes

from limbo.base.errors import UsageError
from limbo.sim.cell import Cell
from limbo.sim.endpoint import Endpoint
from limbo.sim.results import ERROR_KINDS
from limbo.sim.service import CONTRACTS, OpSpec
from limbo.sim.tools import KEY_FIELD, toolset

NATIVE_KEYED = {"social_publish", "billing_create_charge"}


def _writes(contract: str) -> dict:
    return {n: s for n, s in toolset(contract).items() if s.kind == "write"}


def _reads(contract: str) -> dict:
    return {n: s for n, s in toolset(contract).items() if s.kind == "read"}


def lags(op: OpSpec) -> dict[str, float | None]:
    """Documented lag of read ``op`` for each value of its ``platform`` argument (or ``*``)."""
    params = inspect.signature(op.func).parameters
    if "platform" not in params:
        return {"*": op.lag({})}
    hint = typing.get_type_hints(op.func)["platform"]
    return {p: op.lag({"platform": p}) for p in typing.get_args(hint)}


def test_native_offers_a_key_only_where_the_service_has_one() -> None:
    offered = {n for n, s in toolset("native").items() if KEY_FIELD in s.schema()["properties"]}
    assert offered == NATIVE_KEYED


def test_keys_everywhere_offers_a_key_on_every_write_and_no_read() -> None:
    tools = toolset("keys-everywhere")
    offered = {n for n, s in tools.items() if KEY_FIELD in s.schema()["properties"]}
    assert offered == set(_writes("keys-everywhere"))
    assert not offered & set(_reads("keys-everywhere"))


def test_native_key_on_a_keyless_tool_is_an_unknown_field() -> None:
    world = make_world("native")
    got = world.boundary.call("tickets_create", {"title": "a", "body": "b", KEY_FIELD: "k"})
    assert got["error"]["kind"] == "invalid_argument" and KEY_FIELD in got["error"]["message"]
    assert world.ledger == []


def test_keys_everywhere_every_write_honours_a_key() -> None:
    world = make_world("keys-everywhere")
    for tool, args in sample_writes(world).items():
        keyed = {**args, KEY_FIELD: f"key-{tool}"}
        first = deliver(world, tool, keyed)
        n = len(world.ledger)
        again = deliver(world, tool, keyed)
        assert first["ok"], (tool, first)
        assert again == {**first, "idempotent_replayed": True}, tool
        assert len(world.ledger) == n, tool
        assert all(e["key"] == f"key-{tool}" for e in world.ledger if e["tool"] == tool)


def test_native_only_the_mastodon_and_charge_keys_are_honoured() -> None:
    world = make_world("native")
    samples = sample_writes(world)
    honoured = []
    for tool in NATIVE_KEYED:
        for args in ([{**samples[tool], "platform": p} for p in ("mastodon", "weibo", "linkedin", "x")]
                     if tool == "social_publish" else [samples[tool]]):
            keyed = {**args, KEY_FIELD: f"k-{tool}-{args.get('platform')}"}
            n = len(world.ledger)
            deliver(world, tool, keyed)
            if deliver(world, tool, keyed).get("idempotent_replayed"):
                honoured.append((tool, args.get("platform")))
                assert len(world.ledger) == n + 1
            else:
                assert len(world.ledger) == n + 2
    assert sorted(honoured) == [("billing_create_charge", None), ("social_publish", "mastodon")]


@pytest.mark.parametrize("contract", CONTRACTS)
def test_write_descriptions_state_key_support(contract: str) -> None:
    for name, spec in _writes(contract).items():
        text = spec.description
        if not spec.accepts_key:
            assert KEY_FIELD not in text, name
            if spec.op.idempotency == "none":
                assert "Not idempotent" in text, name
        elif contract == "native" and name == "social_publish":
            assert "mastodon only" in text and "1 h" in text and "422" in text
        else:
            assert "idempotency_key" in text and "24 h" in text and "422" in text, name


@pytest.mark.parametrize("contract", CONTRACTS)
def test_natural_and_conditional_writes_say_what_a_repeat_returns(contract: str) -> None:
    for name, spec in _writes(contract).items():
        if spec.op.idempotency in ("natural", "conditional"):
            assert re.search(r"409|404|changes nothing", spec.description), name


@pytest.mark.parametrize("contract", CONTRACTS)
def test_read_descriptions_state_each_lag(contract: str) -> None:
    for name, spec in _reads(contract).items():
        text = spec.description.lower()
        values = lags(spec.op)
        for target, lag in values.items():
            if lag is None:
                assert "not available" in text and target in text, name
            elif lag > 0:
                assert f"{lag:g} s" in text, name
                if target != "*":
                    assert target in text, name
        if all(v == 0 for v in values.values()):
            assert "strongly consistent" in text, name


def test_documented_lags() -> None:
    reads = _reads("native")
    assert lags(reads["social_list_posts"].op) == {
        "mastodon": 0.0, "weibo": 180.0, "linkedin": 0.0, "x": None}
    assert lags(reads["tickets_search"].op) == {"*": 120.0}
    assert lags(reads["mail_search_sent"].op) == {"*": 120.0}
    strong = {n for n, s in reads.items() if set(lags(s.op).values()) == {0.0}}
    assert strong == {"billing_list_charges", "tickets_list_recent", "data_query",
                      "deploy_list_runs", "deploy_get_run"}


def test_reads_never_take_a_key_and_writes_have_a_readback_tool() -> None:
    tools = toolset("keys-everywhere")
    for name, spec in _writes("keys-everywhere").items():
        if name == "social_delete_post":
            continue  # cleanup: nothing to read back
        world = make_world("keys-everywhere")
        args = {k: v for k, v in sample_writes(world)[name].items() if k != KEY_FIELD}
        rb = spec.op.readback(args)
        assert rb is not None and f"{spec.op.service}_{rb.op}" in tools, name


def test_result_shapes_use_the_closed_error_set() -> None:
    world = make_world("native")
    samples = sample_writes(world)
    results = [deliver(world, t, a) for t, a in samples.items()]
    results += [deliver(world, t, a) for t, a in samples.items()]  # repeats: 404/409s
    results.append(deliver(world, "social_list_posts", {"platform": "x"}))
    for r in results:
        assert isinstance(r["ok"], bool)
        if not r["ok"]:
            assert set(r["error"]) >= {"status", "kind", "message"}
            assert r["error"]["kind"] in ERROR_KINDS


def test_results_never_alias_service_state() -> None:
    """A harness or scaffold that edits a result cannot change a row or a stored replay."""
    world = make_world("native")
    args = {"customer_id": "cus_101", "amount_cents": 100, "currency": "usd",
            "description": "d", KEY_FIELD: "k"}
    first = deliver(world, "billing_create_charge", args)
    first["charge"]["amount_cents"] = 1
    first["note"] = "edited"
    listed = deliver(world, "billing_list_charges", {})
    listed["items"][0]["status"] = "refunded"
    assert deliver(world, "billing_list_charges", {})["items"][0]["amount_cents"] == 100
    assert deliver(world, "billing_list_charges", {})["items"][0]["status"] == "succeeded"
    replay = deliver(world, "billing_create_charge", args)
    assert replay["charge"]["amount_cents"] == 100 and "note" not in replay


@pytest.mark.parametrize("typo", ["keyed", "Native", "keys_everywhere", ""])
def test_a_contract_that_is_not_one_of_the_two_is_refused_everywhere(typo: str) -> None:
    """A misspelt contract never builds a hybrid world: the tool set, a cell and an endpoint
    all refuse it, naming the two contracts."""
    with pytest.raises(UsageError, match="native, keys-everywhere"):
        toolset(typo)
    with pytest.raises(ValidationError):
        Cell(contract=typo, service="billing", template="charge_invoice",
             focal_write="billing_create_charge")
    with pytest.raises(UsageError, match="unknown contract"):
        Endpoint({}, typo, "agent", None, [])  # type: ignore[arg-type]
