"""Must-show 1 of ``limbo proxy``: in front of a team's own MCP server (an orders service over a
real SQLite file, built with the ``mcp`` SDK), driven by scripted clients through the SDK's own
client, the proxy's ledger counts what the database holds — one duplicate and two rows when a
client re-issues blindly after a timeout that hid a commit, none and one row when the client
sends the idempotency key the server honours — and in every case the ledger equals the
database, whatever the fault did."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.proxy_runs import Agent, before_ids, database, keyed, ledger, run_stdio


async def blind(agent: Agent) -> None:
    """Places the order; on any failure, places it again, once."""
    ok, _ = await agent.call("create_order", agent.order())
    if not ok:
        await agent.call("create_order", agent.order())
    await agent.finish()



async def verify(agent: Agent) -> None:
    """Places the order; on a failure, looks for it and re-issues only if it is not there."""
    args = agent.order()
    ok, _ = await agent.call("create_order", args)
    if not ok:
        _, listed = await agent.call("list_orders", {"customer_id": args["customer_id"]})
        if not any(o["sku"] == args["sku"] for o in listed["orders"]):
            await agent.call("create_order", args)
    await agent.finish()


def _rows(run) -> list:
    return database(run.db, before_ids(run.journal))["orders_create_order"]


def _agrees(run) -> None:
    """The ledger equals the database: every effect either holds, and nothing else."""
    assert ledger(run.record) == database(run.db, before_ids(run.journal))


def test_a_blind_reissue_after_a_hidden_commit_is_one_duplicate_and_two_rows(
        tmp_path: Path) -> None:
    run = run_stdio(tmp_path, "timeout_post", blind)
    out, proxy = run.record["outcome"], run.record["runtime"]["proxy"]
    first = run.agent.answers[0]
    assert first[1] is False and first[2]["error"]["kind"] == "timeout"  # the agent saw a timeout
    assert len(_rows(run)) == 2 and len({r[1:] for r in _rows(run)}) == 1  # one key, two rows
    assert sum(proxy["duplicates"].values()) == 1 and out["duplicate"]
    assert out["commits"] == {"order": 2} and not out["exactly_once"] and out["task_success"]
    assert out["overclaim"] and out["fault_fired"]  # it said "completed", clean
    assert [e["attempt"] for e in run.record["ledger"]] == ["original", "reissue-1"]
    _agrees(run)


def test_a_key_the_upstream_honours_makes_the_reissue_no_effect(tmp_path: Path) -> None:
    run = run_stdio(tmp_path, "timeout_post", keyed)
    out, proxy = run.record["outcome"], run.record["runtime"]["proxy"]
    assert run.agent.answers[1][2]["idempotent_replayed"] is True  # the server replayed it
    assert len(_rows(run)) == 1 and proxy["duplicates"] == {}
    assert proxy["writes"] == {"committed": 1, "replayed": 1}
    assert out["exactly_once"] and not out["duplicate"] and out["commits"] == {"order": 1}
    assert run.record["ledger"][0]["key"] == "order-once-1"
    _agrees(run)


@pytest.mark.parametrize(("fault", "script", "rows", "duplicate"), [
    ("none", blind, 1, False),
    ("timeout_pre", blind, 1, False),  # never sent: the re-issue is the only order
    ("http500_post", verify, 1, False),  # committed, seen, not re-issued
    ("conn_reset_post", keyed, 1, False),
    ("throttle_pre", blind, 1, False),
    ("timeout_late", verify, 2, True),  # nothing to see yet; the late one lands after the retry
    ("stale_readback", verify, 2, True),  # the next read hides the committed order
    ("redelivery", blind, 2, True),  # the copy commits again: no key
    ("redelivery", keyed, 1, False),  # ... unless a key dedupes it
    ("phantom_success", blind, 0, False),  # acknowledged, never sent
])
def test_the_ledger_equals_the_database_under_every_mode(tmp_path: Path, fault: str, script,
                                                         rows: int, duplicate: bool) -> None:
    run = run_stdio(tmp_path, fault, script)
    out = run.record["outcome"]
    assert len(_rows(run)) == rows, (run.agent.answers, run.stderr)
    assert out["duplicate"] is duplicate and out["fault_fired"]
    assert out["task_success"] is (rows > 0)
    assert out["exactly_once"] is (rows == 1)
    _agrees(run)


def test_a_late_write_lands_after_the_timeout_and_even_after_finish(tmp_path: Path) -> None:
    async def gives_up(agent: Agent) -> None:
        ok, _ = await agent.call("create_order", agent.order())
        assert not ok
        _, listed = await agent.call("list_orders", {})
        assert listed["orders"] == []  # not yet
        await agent.finish("failed")

    run = run_stdio(tmp_path, "timeout_late", gives_up)
    (fault,) = [e for e in run.record["events"] if e["type"] == "fault"]
    (arrival,) = [e for e in run.record["events"] if e["type"] == "arrival"]
    (finish,) = [e for e in run.record["events"] if e["type"] == "finish"]
    assert fault["detail"]["delay_after_timeout_s"] == pytest.approx(0.9)
    assert arrival["outcome"] == "committed" and arrival["t"] > finish["t"]
    assert arrival["t"] >= fault["detail"]["lands_at"]
    assert len(_rows(run)) == 1 and run.record["outcome"]["task_success"]
    assert run.record["report"]["status"] == "failed"
    _agrees(run)


def test_a_stale_read_leaves_out_the_committed_write(tmp_path: Path) -> None:
    run = run_stdio(tmp_path, "stale_readback", verify)
    reads = [a for a in run.agent.answers if a[0] == "list_orders"]
    assert reads[0][2]["orders"] == []  # the replica was stale ...
    first_row = _rows(run)[0]
    assert first_row[0] == run.record["ledger"][0]["object_id"]  # ... the order existed
    stale = [e for e in run.record["events"] if e["type"] == "fault" and "stale_as_of" in
             e["detail"]]
    assert len(stale) == 1


def test_a_partial_batch_commits_the_first_k_lines(tmp_path: Path) -> None:
    async def whole_again(agent: Agent) -> None:
        order = agent.named("order")
        lines = agent.prompt.split(": ", 1)[1].rstrip(".")
        import json

        batch = {"order_id": order, "lines": json.loads(lines)}
        ok, _ = await agent.call("add_lines", batch)
        assert not ok
        await agent.call("add_lines", batch)  # the whole batch again: the first k twice
        await agent.finish()

    run = run_stdio(tmp_path, "partial_batch", whole_again, "orders_lines")
    (fault,) = [e for e in run.record["events"] if e["type"] == "fault"]
    k, n = fault["detail"]["k"], fault["detail"]["n"]
    assert 1 <= k < n
    lines = database(run.db, before_ids(run.journal))["orders_add_lines"]
    assert len(lines) == k + n
    out = run.record["outcome"]
    assert out["duplicate"] and out["task_success"] and sum(out["commits"].values()) == k + n
    _agrees(run)


def test_a_refused_second_refund_is_reconciled_as_no_effect(tmp_path: Path) -> None:
    """The upstream answers the blind second refund with an error: the proxy does not take an
    error for "no effect" on trust — it reconciles it against the orders, where the one refund
    is the first call's."""
    async def refund_twice(agent: Agent) -> None:
        args = {"order_id": agent.named("order")}
        ok, _ = await agent.call("refund_order", args)
        assert not ok
        ok, body = await agent.call("refund_order", args)
        assert not ok and "already refunded" in str(body)
        await agent.finish()

    run = run_stdio(tmp_path, "timeout_post", refund_twice, "orders_refund")
    proxy = run.record["runtime"]["proxy"]
    assert proxy["writes"] == {"committed": 1, "absent": 1}
    assert [r["state"] for r in proxy["reconciled"]] == ["absent"]
    out = run.record["outcome"]
    assert out["exactly_once"] and not out["duplicate"]
    _agrees(run)


@pytest.mark.parametrize(("fault", "rows"), [("http500_post", 1), ("timeout_pre", 0),
                                             ("none", 1)])
def test_the_proxy_never_retries_a_write_on_its_own(tmp_path: Path, fault: str,
                                                    rows: int) -> None:
    """A client that calls once and gives up: each call reaches the upstream at most once."""
    async def once(agent: Agent) -> None:
        await agent.call("create_order", agent.order())
        await agent.finish("failed")

    run = run_stdio(tmp_path, fault, once)
    intents = [e for e in run.journal if e["type"] == "intent"]
    assert len(intents) == rows == len(_rows(run))
    _agrees(run)
