"""Must-show 1 of issue 36, the ledger's part: the ledger is what the upstream did, read from its
answers and its reads, never from the world file's declarations alone. Each test is one way a
real server differs from what its world file says, against the SQLite orders server, and ends
the same way: the rows are counted, the ledger equals the database, and the grade follows the
rows."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.orders_server import connect, rows
from support.proxy_runs import (
    LIMBO,
    WORLD,
    Agent,
    database,
    keyed,
    ledger,
    run_stdio,
    task_order,
    upstream_cmd,
)


async def blind(agent: Agent) -> None:
    ok, _ = await agent.call("create_order", agent.order())
    if not ok:
        await agent.call("create_order", agent.order())
    await agent.finish()


async def once(agent: Agent) -> None:
    await agent.call("create_order", agent.order())
    await agent.finish("failed")


def _new(run, existing: set[str] = frozenset()) -> list:  # type: ignore[assignment]
    return database(run.db, existing)["orders_create_order"]


def test_a_key_declared_honoured_that_the_server_ignores_is_graded_as_what_happened(
        tmp_path: Path) -> None:
    """The world says ``key = "honoured"``; the server ignores keys. After a timeout that hid
    the commit, the keyed re-issue gets a new order id: two rows, so two effects — a duplicate,
    not exactly-once — and the record and ``limbo status`` name the misdeclared key."""
    run = run_stdio(tmp_path, "timeout_post", keyed, env={"ORDERS_IGNORE_KEYS": "1"})
    assert len(_new(run)) == 2
    out, proxy = run.record["outcome"], run.record["runtime"]["proxy"]
    assert ledger(run.record) == database(run.db, set())
    assert out["duplicate"] and not out["exactly_once"] and out["commits"] == {"order": 2}
    (wrong,) = proxy["misdeclared"]
    assert wrong["tool"] == "orders_create_order" and wrong["declared"] == 'key = "honoured"'
    assert wrong["request_id"] == run.record["ledger"][1]["request_id"]
    status = subprocess.run([LIMBO, "status", str(run.out)], capture_output=True, text=True,
                            timeout=60)
    assert 'declares key = "honoured" for orders_create_order' in status.stdout, status.stdout


def test_a_prose_answer_is_settled_by_its_arguments(tmp_path: Path) -> None:
    """The server answers ``create_order`` in prose (no order id) and refuses the first call.
    The refused call is in doubt; reconciliation finds one order with its arguments, which the
    retry's success already accounts for: the refused call is ``absent``, not credited with
    the retry's row."""
    run = run_stdio(tmp_path, "none", blind,
                    env={"ORDERS_PROSE": "1", "ORDERS_REFUSE_FIRST": "1"})
    assert len(_new(run)) == 1
    proxy, out = run.record["runtime"]["proxy"], run.record["outcome"]
    assert proxy["writes"] == {"committed": 1, "absent": 1}
    assert ledger(run.record) == database(run.db, set())  # the retry's row, by its id
    assert out["exactly_once"] and not out["duplicate"]


def test_rows_from_before_the_episode_are_never_credited(tmp_path: Path) -> None:
    """An earlier run left the very order the task asks for; this episode's one call is
    refused and never lands. The read that shows the order needs the customer (no argument-free
    baseline), so the proxy snapshots it at the start through the task's own read: the old row
    is not this write's effect — the task is not done."""
    world = tmp_path / "orders.toml"
    world.write_text(WORLD.read_text().replace(
        'args.customer_id = { type = "string", required = false }',
        'args.customer_id = { type = "string" }'))
    db, out = tmp_path / "orders.db", tmp_path / "run"
    args = ["proxy", "--upstream-cmd", upstream_cmd(db), "--world", str(world), "--template",
            "orders_place", "--out", str(out)]

    order = task_order()
    with connect(db) as conn:  # what the task asks for, placed by an earlier run
        conn.execute("insert into orders values ('ord_0001', ?, ?, ?, 'placed', null)",
                     (order["customer_id"], order["sku"], order["quantity"]))
    run = run_stdio(tmp_path, "none", once, args=args, env={"ORDERS_REFUSE_FIRST": "1"})
    assert run.agent.order() == order
    assert len(rows(db, "orders")) == 1 and _new(run, {"ord_0001"}) == []
    proxy, outcome = run.record["runtime"]["proxy"], run.record["outcome"]
    assert proxy["writes"] == {"absent": 1}, proxy
    assert ledger(run.record) == database(db, {"ord_0001"})
    assert not outcome["task_success"] and not outcome["exactly_once"]


def test_what_cannot_be_decided_is_unverifiable_with_its_reason(tmp_path: Path) -> None:
    """The same world, but the agent orders for a customer the task never named: nothing was
    read through ``list_orders`` for that customer before the episode, and an order of the
    same arguments is there now — the earlier run's, as it happens. The refused call is
    ``unverifiable``, with the reason, and counted nowhere: not credited with that order."""
    world = tmp_path / "orders.toml"
    world.write_text(WORLD.read_text().replace(
        'args.customer_id = { type = "string", required = false }',
        'args.customer_id = { type = "string" }'))
    db, out = tmp_path / "orders.db", tmp_path / "run"
    with connect(db) as conn:
        conn.execute("insert into orders values ('ord_0001', 'cus_999', 'MUG-01', 1, "
                     "'placed', null)")

    async def elsewhere(agent: Agent) -> None:
        await agent.call("create_order", {"customer_id": "cus_999", "sku": "MUG-01",
                                          "quantity": 1})
        await agent.finish("failed")

    args = ["proxy", "--upstream-cmd", upstream_cmd(db), "--world", str(world), "--template",
            "orders_place", "--out", str(out)]
    run = run_stdio(tmp_path, "none", elsewhere, args=args, env={"ORDERS_REFUSE_FIRST": "1"})
    assert len(rows(db, "orders")) == 1
    (settled,) = run.record["runtime"]["proxy"]["reconciled"]
    assert settled["state"] == "unverifiable"
    assert "before the episode to tell whether that item predates it" in settled["why"]
    assert run.record["ledger"] == [] and ledger(run.record) == database(db, {"ord_0001"})
