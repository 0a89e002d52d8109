"""The action guard as a library: the seed article's eight behaviours, the leaky-cache bug, and
the rest of the seven steps (read-back before a repeat, batches, receipts, decisions, expiry).

Every behaviour runs against both key stores (in memory and SQLite): the store is pluggable,
so what the guard promises must not depend on which one is plugged in.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from limbo.harnesses.guard import (
    Guard,
    GuardUsageError,
    MemoryKeyStore,
    SQLiteKeyStore,
    Tool,
    ToolFailure,
    Verification,
)


class Ledger:
    """The world behind the tools: every executed write is one entry."""

    def __init__(self) -> None:
        self.charges: list[dict[str, Any]] = []

    def charge(self, customer: str, amount_cents: int, note: str = "") -> dict[str, Any]:
        self.charges.append({"customer": customer, "amount_cents": amount_cents, "note": note})
        return {"charge_id": f"ch_{len(self.charges)}", "amount_cents": amount_cents}

    def list_charges(self, customer: str) -> list[dict[str, Any]]:
        return [c for c in self.charges if c["customer"] == customer]


class CountingStore(MemoryKeyStore):
    """A real in-memory store that also counts how often the guard consulted it."""

    def __init__(self) -> None:
        super().__init__()
        self.claims = 0

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self.claims += 1
        return super().claim(*args, **kwargs)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield MemoryKeyStore()
    else:
        s = SQLiteKeyStore(tmp_path / "keys.db")
        yield s
        s.close()


def allow_all(caller: str, tool: str, args: dict[str, Any]) -> bool:
    return True


def make_guard(ledger: Ledger, store: Any = None, authorize: Any = allow_all, **tool_opts: Any
               ) -> Guard:
    return Guard([Tool("charge", ledger.charge, write=True, **tool_opts),
                  Tool("list_charges", ledger.list_charges)],
                 authorize=authorize, store=store)


CHARGE = {"customer": "cus_1", "amount_cents": 4200}


# -- 1. validation and coercion before any write ------------------------------------------------


def test_arguments_are_validated_and_coerced_before_any_write(store: Any) -> None:
    ledger = Ledger()
    guard = make_guard(ledger, store)
    ok = guard.call_sync("alice", "charge", {"customer": "cus_1", "amount_cents": "4200"})
    assert ok.ok and ledger.charges == [{"customer": "cus_1", "amount_cents": 4200, "note": ""}]
    assert isinstance(ledger.charges[0]["amount_cents"], int)  # coerced, not passed through
    assert ok.receipt is not None and ok.receipt.args["amount_cents"] == 4200
    for bad in ({"customer": "cus_1"},                                   # missing field
                {**CHARGE, "amount_cents": "a lot"},                     # wrong type
                {**CHARGE, "currency": "usd"}):                          # unknown field
        res = guard.call_sync("alice", "charge", bad)
        assert not res.ok and res.error is not None and res.error.kind == "invalid_arguments"
        assert res.receipt is None
    unknown = guard.call_sync("alice", "drop_tables", {})
    assert unknown.error is not None and unknown.error.kind == "unknown_tool"
    assert len(ledger.charges) == 1


def test_a_pydantic_schema_is_honoured() -> None:
    class ChargeArgs(BaseModel):
        customer: str
        amount_cents: int

    ledger = Ledger()
    guard = Guard([Tool("charge", ledger.charge, schema=ChargeArgs, write=True)],
                  authorize=allow_all)
    assert guard.call_sync("alice", "charge", {**CHARGE, "amount_cents": "17"}).ok
    assert not guard.call_sync("alice", "charge", {**CHARGE, "note": "x"}).ok  # not in schema
    assert ledger.charges == [{"customer": "cus_1", "amount_cents": 17, "note": ""}]


# -- 2. malformed and non-finite arguments -----------------------------------------------------


@pytest.mark.parametrize("raw", [
    "not json at all",
    "[1, 2, 3]",
    42,
    ["customer", "cus_1"],
    '{"customer": "cus_1", "amount": NaN}',
    {"customer": "cus_1", "amount": math.nan},
    {"customer": "cus_1", "amount": math.inf},
    {"customer": "cus_1", "amount": -math.inf},
    {"customer": "cus_1", "amount": "nan"},
    {"customer": "cus_1", "amount": "-Infinity"},
    {"customer": "cus_1", "amount": 1.0, "meta": {"rate": math.nan}},
])
def test_malformed_and_non_finite_arguments_write_nothing(raw: Any, store: Any) -> None:
    class Args(BaseModel):  # a permissive user model: NaN would pass pydantic's defaults
        customer: str
        amount: float
        meta: dict[str, float] = {}

    executed: list[Any] = []
    guard = Guard([Tool("pay", lambda **kw: executed.append(kw), schema=Args, write=True)],
                  authorize=allow_all, store=store)
    res = guard.call_sync("alice", "pay", raw)
    assert not res.ok and res.error is not None and res.error.kind == "invalid_arguments"
    assert executed == [] and res.receipt is None
    # and nothing was claimed: the well-formed call that follows is a first execution
    assert guard.call_sync("alice", "pay", {"customer": "cus_1", "amount": 1.0}).receipt.replayed is False


# -- 3. same caller + key + action + args replays one write -------------------------------------


def test_the_same_call_replays_one_write(store: Any) -> None:
    ledger = Ledger()
    guard = make_guard(ledger, store, key_param="idempotency_key", honours_key=False)
    first = guard.call_sync("alice", "charge", {**CHARGE, "idempotency_key": "k1"})
    again = guard.call_sync("alice", "charge", {**CHARGE, "idempotency_key": "k1"})
    assert len(ledger.charges) == 1
    assert first.ok and again.ok and again.value == first.value
    assert first.receipt is not None and again.receipt is not None
    assert (first.receipt.replayed, again.receipt.replayed) == (False, True)
    assert again.receipt.key == "k1" and again.receipt.key_source == "caller"
    # without a key, the derived key is the same for the same canonical call ("4200" == 4200)
    plain = guard.call_sync("alice", "charge", {"customer": "cus_2", "amount_cents": 5})
    spelled = guard.call_sync("alice", "charge", {"amount_cents": "5", "customer": "cus_2"})
    assert spelled.receipt is not None and spelled.receipt.replayed
    assert spelled.receipt.key == plain.receipt.key and spelled.receipt.key_source == "derived"
    assert len(ledger.charges) == 2


# -- 4. simultaneous retries share one write ----------------------------------------------------


def test_simultaneous_identical_calls_share_one_execution(store: Any) -> None:
    executions: list[int] = []

    async def slow_charge(customer: str, amount_cents: int) -> dict[str, Any]:
        executions.append(amount_cents)
        for _ in range(5):  # stay in flight while the others arrive
            await asyncio.sleep(0)
        return {"charge_id": f"ch_{len(executions)}"}

    guard = Guard([Tool("charge", slow_charge, write=True)], authorize=allow_all, store=store)

    async def burst() -> list[Any]:
        return list(await asyncio.gather(*(guard.call("alice", "charge", CHARGE)
                                           for _ in range(5))))

    results = asyncio.run(burst())
    assert executions == [4200]
    assert all(r.ok and r.value == {"charge_id": "ch_1"} for r in results)
    assert sorted(r.receipt.shared for r in results) == [False, True, True, True, True]
    assert sum(not r.receipt.replayed for r in results) == 1


# -- 5. a reused key with other arguments is a conflict -----------------------------------------


def test_a_reused_key_with_other_arguments_or_tool_is_a_conflict(store: Any) -> None:
    ledger = Ledger()
    guard = Guard([Tool("charge", ledger.charge, write=True, key_param="idempotency_key",
                        honours_key=False),
                   Tool("refund", lambda charge_id, idempotency_key=None: {"ok": True},
                        write=True, key_param="idempotency_key")],
                  authorize=allow_all, store=store)
    assert guard.call_sync("alice", "charge", CHARGE, key="k1").ok
    other_args = guard.call_sync("alice", "charge", {**CHARGE, "amount_cents": 9900}, key="k1")
    other_tool = guard.call_sync("alice", "refund", {"charge_id": "ch_1"}, key="k1")
    for res in (other_args, other_tool):
        assert not res.ok and res.error is not None and res.error.kind == "conflict"
        assert res.value is None and res.receipt is None  # never served as a replay
    assert len(ledger.charges) == 1


# -- 6. authorisation before the idempotency lookup (the leaky cache) ---------------------------


def test_a_refused_caller_with_anothers_key_learns_nothing() -> None:
    ledger = Ledger()
    store = CountingStore()
    guard = make_guard(ledger, store, authorize=lambda caller, tool, args:
                       caller == "alice" or tool == "list_charges",
                       key_param="idempotency_key", honours_key=False)
    first = guard.call_sync("alice", "charge", CHARGE, key="shared-key")
    assert first.ok and store.claims == 1
    stolen = guard.call_sync("mallory", "charge", CHARGE, key="shared-key")
    assert not stolen.ok and stolen.error is not None and stolen.error.kind == "forbidden"
    assert stolen.value is None and stolen.receipt is None  # neither receipt nor replay
    assert store.claims == 1  # the key store was never consulted for the refused caller
    assert all(d.key is None for d in stolen.decisions)  # nothing about the key leaks either
    assert "ch_1" not in repr(stolen)
    assert len(ledger.charges) == 1


def test_keys_are_scoped_to_the_caller() -> None:
    ledger = Ledger()
    guard = make_guard(ledger, key_param="idempotency_key", honours_key=False)
    alice = guard.call_sync("alice", "charge", CHARGE, key="k")
    bob = guard.call_sync("bob", "charge", CHARGE, key="k")
    assert bob.receipt is not None and not bob.receipt.replayed  # bob's own write, not alice's
    assert bob.value != alice.value and len(ledger.charges) == 2


def test_authorisation_runs_on_retries_too() -> None:
    ledger = Ledger()
    allowed = {"alice"}
    guard = make_guard(ledger, authorize=lambda caller, tool, args: caller in allowed)
    assert guard.call_sync("alice", "charge", CHARGE).ok
    allowed.clear()  # access revoked: a replay must not be served
    again = guard.call_sync("alice", "charge", CHARGE)
    assert again.error is not None and again.error.kind == "forbidden" and again.value is None


# -- 7. an async authorisation policy is awaited and fails closed --------------------------------


def test_an_async_policy_is_awaited_and_fails_closed() -> None:
    async def policy(caller: str, tool: str, args: dict[str, Any]) -> bool:
        await asyncio.sleep(0)
        if caller == "broken":
            raise RuntimeError("policy backend down")
        return caller == "alice"

    ledger = Ledger()
    guard = make_guard(ledger, authorize=policy)

    async def calls() -> list[Any]:
        return [await guard.call(c, "charge", {**CHARGE, "note": c})
                for c in ("alice", "bob", "broken")]

    alice, bob, broken = asyncio.run(calls())
    assert alice.ok
    assert bob.error.kind == "forbidden" and broken.error.kind == "forbidden"
    assert broken.decisions[-1].detail == {"reason": "RuntimeError"}
    # the sync API awaits an async policy too (outside a running loop)
    assert guard.call_sync("alice", "charge", {**CHARGE, "note": "sync"}).ok
    assert [c["note"] for c in ledger.charges] == ["alice", "sync"]


@pytest.mark.parametrize("verdict", [1, "yes", None, object()])
def test_only_a_literal_true_allows(verdict: Any) -> None:
    ledger = Ledger()
    guard = make_guard(ledger, authorize=lambda caller, tool, args: verdict)
    assert guard.call_sync("alice", "charge", CHARGE).error.kind == "forbidden"
    assert ledger.charges == []


# -- 8. a definite failure releases the key, an ambiguous one keeps it ------------------------


class Flaky:
    """A charge endpoint that fails the first call in a chosen way, having acted or not."""

    def __init__(self, failure: str, acted: bool) -> None:
        self.failure, self.acted = failure, acted
        self.effects: list[tuple[int, str | None]] = []
        self.calls: list[str | None] = []

    def charge(self, customer: str, amount_cents: int, idempotency_key: str | None = None
               ) -> dict[str, Any]:
        self.calls.append(idempotency_key)
        if len(self.calls) == 1:
            if self.acted:
                self.effects.append((amount_cents, idempotency_key))
            if self.failure == "timeout":
                raise TimeoutError("no response")
            raise ToolFailure("card declined", ambiguous=self.failure == "ambiguous")
        if idempotency_key is not None and any(k == idempotency_key for _, k in self.effects):
            return {"replayed": True}  # the service dedupes by key
        self.effects.append((amount_cents, idempotency_key))
        return {"charged": amount_cents}


def test_a_definite_failure_releases_the_key_so_a_corrected_retry_runs(store: Any) -> None:
    svc = Flaky("definite", acted=False)
    guard = Guard([Tool("charge", svc.charge, write=True, key_param="idempotency_key")],
                  authorize=allow_all, store=store)
    first = guard.call_sync("alice", "charge", CHARGE, key="k")
    assert first.error is not None and first.error.kind == "failed" and first.error.ambiguous is False
    retry = guard.call_sync("alice", "charge", CHARGE, key="k")
    assert retry.ok and retry.receipt is not None and not retry.receipt.replayed
    assert svc.effects == [(4200, "k")]


@pytest.mark.parametrize("failure", ["ambiguous", "timeout"])
def test_an_ambiguous_failure_keeps_the_key_and_the_retry_carries_it(failure: str, store: Any
                                                                     ) -> None:
    svc = Flaky(failure, acted=True)
    guard = Guard([Tool("charge", svc.charge, write=True, key_param="idempotency_key")],
                  authorize=allow_all, store=store)
    first = guard.call_sync("alice", "charge", CHARGE)  # no key given: one is derived
    assert first.error is not None and first.error.ambiguous is True
    retry = guard.call_sync("alice", "charge", CHARGE)
    assert retry.ok and retry.value == {"replayed": True}
    assert svc.calls[0] is not None and svc.calls == [svc.calls[0]] * 2  # same key both times
    assert len(svc.effects) == 1
    assert [d.action for d in retry.decisions if d.step in (4, 6)] == [
        "retry_after_ambiguous", "forward_keyed"]


# -- step 6: a repeat the service cannot dedupe is read back first ------------------------------


def test_a_repeat_after_an_ambiguous_failure_is_read_back_before_it_is_reissued(store: Any
                                                                             ) -> None:
    ledger = Ledger()
    calls = 0

    def charge(customer: str, amount_cents: int) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        value = ledger.charge(customer, amount_cents)
        if calls == 1:
            raise TimeoutError("response lost after the commit")
        return value

    def verify(args: dict[str, Any]) -> Verification:
        found = [c for c in ledger.list_charges(args["customer"])
                 if c["amount_cents"] == args["amount_cents"]]
        return Verification(bool(found), {"found": found[0]} if found else None)

    guard = Guard([Tool("charge", charge, write=True, verify=verify)], authorize=allow_all,
                  store=store)
    assert guard.call_sync("alice", "charge", CHARGE).error.ambiguous
    retry = guard.call_sync("alice", "charge", CHARGE)
    assert retry.ok and retry.value == {"found": ledger.charges[0]}
    assert retry.receipt.replayed and retry.receipt.verified
    assert calls == 1 and len(ledger.charges) == 1
    # the receipt is now stored: a third identical call is a plain replay
    assert guard.call_sync("alice", "charge", CHARGE).receipt.replayed


def test_a_batch_is_checked_row_by_row_and_only_missing_rows_are_sent(store: Any) -> None:
    table: list[str] = []
    sent: list[list[str]] = []

    def insert_many(rows: list[str]) -> dict[str, Any]:
        sent.append(list(rows))
        if len(sent) == 1:
            table.extend(rows[:2])  # two rows land, then the server fails
            raise ToolFailure("internal error", ambiguous=True)
        table.extend(rows)
        return {"inserted": len(rows)}

    def verify(args: dict[str, Any]) -> Verification:
        missing = tuple(i for i, r in enumerate(args["rows"]) if r not in table)
        return Verification(not missing, {"inserted": 0}, missing)

    guard = Guard([Tool("insert_many", insert_many, write=True, verify=verify,
                        narrow=lambda a, m: {**a, "rows": [a["rows"][i] for i in m]})],
                  authorize=allow_all, store=store)
    rows = {"rows": ["a", "b", "c", "d"]}
    assert not guard.call_sync("alice", "insert_many", rows).ok
    retry = guard.call_sync("alice", "insert_many", rows)
    assert retry.ok and sent == [["a", "b", "c", "d"], ["c", "d"]] and table == list("abcd")
    assert retry.receipt.forwarded_units == (2, 3) and retry.receipt.verified is False


def test_a_write_that_cannot_be_verified_is_forwarded_and_the_decision_says_so() -> None:
    effects: list[str] = []

    def post(text: str) -> dict[str, Any]:
        effects.append(text)
        if len(effects) == 1:
            raise ConnectionError("reset")
        return {"posted": True}

    guard = Guard([Tool("post", post, write=True)], authorize=allow_all)
    guard.call_sync("alice", "post", {"text": "hi"})
    retry = guard.call_sync("alice", "post", {"text": "hi"})
    assert retry.ok and effects == ["hi", "hi"]  # the guard could not know, and says so
    [decision] = [d for d in retry.decisions if d.step == 6]
    assert decision.action == "forward_unverified" and "no read-back" in decision.detail["reason"]


# -- receipts, decisions, failures the guard does not understand --------------------------------


def test_every_write_returns_a_receipt_and_every_decision_is_logged() -> None:
    ledger = Ledger()
    seen: list[Any] = []
    guard = Guard([Tool("charge", ledger.charge, write=True), Tool("list", ledger.list_charges)],
                  authorize=allow_all, on_decision=seen.append)
    write = guard.call_sync("alice", "charge", CHARGE)
    read = guard.call_sync("alice", "list", {"customer": "cus_1"})
    assert write.receipt is not None and write.receipt.tool == "charge"
    assert write.receipt.as_dict()["key"] == write.receipt.key
    assert read.ok and read.receipt is None and len(read.value) == 1  # reads: steps 1-2 only
    assert [d.action for d in seen] == ["authorised", "key", "executed", "authorised"]
    assert list(guard.decisions) == seen


def test_an_unexpected_exception_is_reraised_and_keeps_the_key() -> None:
    calls: list[int] = []

    def buggy(n: int) -> None:
        calls.append(n)
        raise KeyError("bug in the tool")

    guard = Guard([Tool("buggy", buggy, write=True)], authorize=allow_all)
    with pytest.raises(KeyError):
        guard.call_sync("alice", "buggy", {"n": 1})
    with pytest.raises(KeyError):  # a retry is treated as after an ambiguous failure
        guard.call_sync("alice", "buggy", {"n": 1})
    assert calls == [1, 1]
    assert [d.action for d in guard.decisions if d.step == 6] == ["forward_unverified"]


def test_an_async_tool_through_the_sync_api_inside_a_loop_is_a_usage_error() -> None:
    async def tool(x: int) -> int:
        return x

    guard = Guard([Tool("t", tool)], authorize=allow_all)
    assert guard.call_sync("a", "t", {"x": 1}).value == 1  # no loop running: fine

    async def inside() -> None:
        guard.call_sync("a", "t", {"x": 1})

    with pytest.raises(GuardUsageError):
        asyncio.run(inside())


def test_keys_expire_and_stale_claims_are_taken_over_on_the_guards_clock(tmp_path: Path) -> None:
    now = [0.0]
    for store in (MemoryKeyStore(ttl_s=100, lease_s=30),
                  SQLiteKeyStore(tmp_path / "k.db", ttl_s=100, lease_s=30)):
        ledger = Ledger()
        guard = make_guard(ledger, store)
        guard.clock = lambda: now[0]
        now[0] = 0.0
        guard.call_sync("alice", "charge", CHARGE)
        now[0] = 99.0
        assert guard.call_sync("alice", "charge", CHARGE).receipt.replayed
        now[0] = 101.0  # past the retention: the key is forgotten and the write runs again
        assert not guard.call_sync("alice", "charge", CHARGE).receipt.replayed
        assert len(ledger.charges) == 2
        # an unfinished claim (its holder died) is busy until its lease runs out
        assert store.claim("alice", "orphan", "charge", "fp", 200.0).verdict == "new"
        assert store.claim("alice", "orphan", "charge", "fp", 229.0).verdict == "busy"
        assert store.claim("alice", "orphan", "charge", "fp", 231.0).verdict == "retry"
