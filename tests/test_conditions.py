"""What each scaffold condition does in the tool layer, one behaviour at a time.

Each test runs real episodes (reference policies or a scripted model, the real world, the real
fault modes) and checks what the condition did: the ledger, the events it recorded, and the
facts it attached to the result the model saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.scripted import scripted

from limbo.base import registry
from limbo.base.hashing import digest
from limbo.base.registry import entries, lookup
from limbo.episode.models import ModelAdapter
from limbo.episode.run_one import run_episode
from limbo.harnesses.scaffolds import SdkRetryLayer
from limbo.sim.boundary import Process
from limbo.sim.cell import Cell
from limbo.sim.fault import Fault, fault
from limbo.sim.request import Request
from limbo.sim.results import error
from limbo.sim.tasks import templates
from limbo.sim.world import World

PROMPTS = Path(__file__).resolve().parents[1] / "harnesses" / "prompts"
PROMPT_CONDITIONS = {"vanilla", "plain", "aware", "rules"}
SCAFFOLDS = {"reflect", "sdk-retry", "vbr", "wait-0", "wait-60", "wait-120", "wait-300",
             "wait-3600", "guard", "state-oracle", "outcome-oracle"}


def cell(template: str, fault: str = "none", condition: str = "vanilla",
         model: str = "policy/verify", focal: str | None = None, **kw: Any) -> Cell:
    t = templates()[template]
    return Cell(model=model, condition=condition, fault=fault, service=t.service,
                template=template, focal_write=focal or t.focal_writes[0], **kw)


def episode(template: str, fault: str = "none", condition: str = "vanilla",
            model: str = "policy/verify", adapter: ModelAdapter | None = None,
            **kw: Any) -> dict[str, Any]:
    record = run_episode(cell(template, fault, condition, model, **kw), adapter)
    assert record["outcome"]["termination"] == "finished", record["outcome"]
    return record


def events(record: dict[str, Any], type_: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in record["events"]
            if e["type"] == type_ and all(e.get(k) == v for k, v in match.items())]


def results(record: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    return [e["result"] for e in events(record, "result", tool=tool)]


def focal_effects(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in record["ledger"] if e["tool"] == record["cell"]["focal_write"]]


def prompt_text(name: str) -> str:
    """A built-in prompt file, read from the source tree."""
    return (PROMPTS / f"{name}.txt").read_text()


class AlwaysServerError(Fault):
    """Test-only mode: every call to the focal write fails with a 500 before executing."""

    family = "not executed"
    families = ("not executed",)

    def handle(self, req: Request) -> Process:
        if req.op.tool != self.ctx.focal_tool:
            return (yield from self.inner.handle(req))
        self.fired = True
        self.emit(req)
        yield self.env.timeout(self.ctx.timing.write_s)
        return error("server_error", "internal server error")


@pytest.fixture
def always_500() -> Iterator[str]:
    fault("test_always_500")(AlwaysServerError)
    try:
        yield AlwaysServerError.name
    finally:
        registry._REGISTRY["fault"].pop(AlwaysServerError.name, None)
        del AlwaysServerError.name


# -- the set of conditions ------------------------------------------------------------------


def test_the_fifteen_conditions_are_registered_with_their_kinds() -> None:
    table = entries("condition")
    assert set(table) == PROMPT_CONDITIONS | SCAFFOLDS
    assert {n for n, c in table.items() if c.kind == "scaffold"} == SCAFFOLDS
    vanilla = table["vanilla"]()
    for name in SCAFFOLDS:
        cond = table[name]()
        assert cond.system_prompt() == vanilla.system_prompt(), name  # scaffolds: vanilla prompt
        hashes = cond.prompt_hashes()
        assert hashes["vanilla"] == vanilla.prompt_hashes()["vanilla"]
        for f, h in hashes.items():  # every text a condition may show is a hashed file
            assert h == digest(prompt_text(f)) and prompt_text(f).strip(), (name, f)
    assert "reflect" in table["reflect"]().prompt_hashes()
    assert "verify_unavailable" in table["wait-300"]().prompt_hashes()


@pytest.mark.parametrize("condition", sorted(SCAFFOLDS))
def test_every_scaffold_is_deterministic(condition: str) -> None:
    c = cell("announce_weibo", "timeout_late_tail", condition, model="policy/blind", seed=7)
    a, b = run_episode(c), run_episode(c)
    a.pop("runtime"), b.pop("runtime")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["header"]["prompts"] == lookup("condition", condition)().prompt_hashes()


@pytest.mark.parametrize("condition", sorted(SCAFFOLDS - {"reflect"}))
def test_without_a_fault_a_scaffold_changes_no_effect(condition: str) -> None:
    base = episode("charge_invoice", "none", "vanilla", model="policy/keyed")
    rec = episode("charge_invoice", "none", condition, model="policy/keyed")
    assert [(e["tool"], e["args"], e["key"]) for e in rec["ledger"]] == [
        (e["tool"], e["args"], e["key"]) for e in base["ledger"]]
    assert rec["outcome"]["exactly_once"] and not events(rec, "condition")


# -- reflect ----------------------------------------------------------------------------------


def test_reflect_asks_the_model_after_a_failed_write_only() -> None:
    world = World.of(cell("open_incident", "none", "reflect"))
    reflect = lookup("condition", "reflect")()
    failed = error("server_error", "internal server error")
    assert reflect.followup("tickets_create", failed, world) == prompt_text("reflect").strip()
    assert reflect.followup("tickets_create", {"ok": True}, world) is None
    assert reflect.followup("tickets_list_recent", failed, world) is None  # a read
    assert events({"events": world.log.events}, "condition") == [
        {"t": 0.0, "type": "condition", "name": "reflect", "action": "followup",
         "tool": "tickets_create", "after": "server_error"}]


def test_reflect_reaches_the_model_and_reference_policies_ignore_it() -> None:
    rec = episode("open_incident", "http500_post", "reflect", model="policy/verify")
    base = episode("open_incident", "http500_post", "vanilla", model="policy/verify")
    assert len(events(rec, "condition", action="followup")) == 1
    assert rec["ledger"] == base["ledger"] and rec["report"] == base["report"]


# -- sdk-retry --------------------------------------------------------------------------------


def test_sdk_retry_resends_the_request_as_it_was_and_shows_only_the_last_outcome() -> None:
    rec = episode("open_incident", "timeout_post", "sdk-retry", model="policy/give-up")
    tickets = focal_effects(rec)
    assert [(e["attempt"], e["key"]) for e in tickets] == [("original", None),
                                                           ("scaffold_retry-1", None)]
    assert rec["outcome"]["duplicate"]  # no key added: the retry after a lost ack duplicates
    [retry] = events(rec, "condition", action="retry")
    assert retry["after"] == "timeout" and 0.375 <= retry["wait_s"] <= 0.5
    [seen] = results(rec, "tickets_create")
    assert seen["ok"] and seen["ticket_id"] == tickets[1]["object_id"]  # the model saw one


def test_sdk_retry_keeps_a_key_the_model_sent() -> None:
    rec = episode("open_incident", "timeout_post", "sdk-retry", model="policy/keyed",
                  contract="keys-everywhere")
    [ticket] = focal_effects(rec)
    [replay] = events(rec, "replay")
    assert replay["attempt"] == "scaffold_retry-1" and replay["key"] == ticket["key"] is not None
    assert rec["outcome"]["exactly_once"]


def test_sdk_retry_honours_retry_after_and_gives_up_after_two_retries(always_500: str) -> None:
    throttled = episode("open_incident", "throttle_pre", "sdk-retry", model="policy/give-up")
    [retry] = events(throttled, "condition", action="retry")
    assert retry["after"] == "rate_limited" and retry["wait_s"] == 20.0
    assert throttled["outcome"]["exactly_once"]

    rec = episode("open_incident", always_500, "sdk-retry", model="policy/give-up")
    retries = events(rec, "condition", action="retry")
    assert [r["attempt"] for r in retries] == ["scaffold_retry-1", "scaffold_retry-2"]
    assert 0.375 <= retries[0]["wait_s"] <= 0.5 and 0.75 <= retries[1]["wait_s"] <= 1.0
    [seen] = results(rec, "tickets_create")
    assert seen["error"]["kind"] == "server_error" and rec["ledger"] == []


def test_sdk_retry_backoff_is_capped_jittered_and_seeded() -> None:
    def delays(seed: int) -> list[float]:
        layer = SdkRetryLayer(None, World.of(cell("open_incident", seed=seed)), "sdk-retry")  # type: ignore[arg-type]
        return [layer.delay(n, error("timeout", "t")) for n in range(8)]

    d = delays(1)
    for n, wait in enumerate(d):
        cap = min(0.5 * 2**n, 8.0)
        assert 0.75 * cap <= wait <= cap
    assert d == delays(1) and d != delays(2)
    layer = SdkRetryLayer(None, World.of(cell("open_incident")), "sdk-retry")  # type: ignore[arg-type]
    assert layer.delay(0, error("rate_limited", "slow down", retry_after_s=7)) == 7.0
    assert layer.delay(0, error("rate_limited", "slow down", retry_after_s=600)) <= 0.5


# -- vbr and wait-Δ ---------------------------------------------------------------------------


def verification(rec: dict[str, Any]) -> dict[str, Any]:
    failed = [r for r in results(rec, rec["cell"]["focal_write"]) if not r["ok"]]
    return failed[0]["error"]["verification"]  # type: ignore[no-any-return]


def test_vbr_attaches_the_read_it_made() -> None:
    strong = episode("announce_mastodon", "timeout_post", "vbr")
    check = verification(strong)
    assert check["read"] == "social_list_posts" and check["visible"] is True
    assert check["items"][0]["post_id"] == focal_effects(strong)[0]["object_id"]
    assert strong["outcome"]["exactly_once"]  # the policy used it instead of its own read

    lagging = verification(episode("announce_weibo", "timeout_post", "vbr"))
    assert (lagging["visible"], lagging["lag_s"], lagging["waited_s"]) == (False, 180.0, 0.0)

    none = verification(episode("announce_x", "timeout_post", "vbr"))
    assert none["visible"] is None and none["lag_s"] is None
    assert none["note"] == prompt_text("verify_unavailable").strip()

    batch = episode("import_batch", "partial_batch", "vbr", model="policy/give-up")
    check = verification(batch)
    landed = len(focal_effects(batch))
    rows = len(batch["header"]["intents"]) - 1
    assert check["visible"] is False and check["missing_units"] == list(range(landed, rows))
    assert len(check["items"]) == landed


def test_wait_conditions_wait_on_the_sim_clock_before_reading() -> None:
    rec = episode("announce_weibo", "timeout_post", "wait-300")
    [timeout] = [e for e in events(rec, "result", tool="social_publish")
                 if not e["result"]["ok"]]
    [act] = events(rec, "condition", name="wait-300", action="verify")
    assert act["t"] == pytest.approx(timeout["t"])  # the model hears back after the read
    check = timeout["result"]["error"]["verification"]
    assert check["waited_s"] == 300.0 and check["visible"] is True  # 300 s > the 180 s lag
    call = events(rec, "call", tool="social_publish")[0]
    assert timeout["t"] == pytest.approx(call["t"] + 30 + 300 + 0.5)
    assert rec["outcome"]["exactly_once"]


# -- the oracles ------------------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "state", "outcome"), [
    ("timeout_pre", (False, False), (False, False)),
    ("timeout_post", (True, False), (True, False)),
    ("timeout_late", (False, False), (False, True)),
    ("timeout_late_tail", (False, False), (False, True)),
    ("http500_post", (True, False), (True, False)),
])
def test_the_oracles_tell_the_truth_now_and_eventually(fault: str, state: tuple[bool, bool],
                                                       outcome: tuple[bool, bool]) -> None:
    for condition, expected in (("state-oracle", state), ("outcome-oracle", outcome)):
        rec = episode("open_incident", fault, condition, model="policy/give-up")
        [failed] = results(rec, "tickets_create")
        oracle = failed["error"]["oracle"]
        assert (oracle["committed"], oracle["will_commit"]) == expected, condition
        assert events(rec, "condition", name=condition)[0]["committed"] == expected[0]


def test_an_oracle_names_the_missing_rows_of_a_partial_batch() -> None:
    rec = episode("import_batch", "partial_batch", "outcome-oracle")
    [fault] = events(rec, "fault")
    landed = [e for e in rec["ledger"] if e["request_id"] == fault["request_id"]]
    oracle = [r for r in results(rec, "data_insert_many") if not r["ok"]][0]["error"]["oracle"]
    rows = len(rec["header"]["intents"]) - 1
    assert oracle["committed"] is False
    assert oracle["missing_units"] == list(range(len(landed), rows))
    assert rec["outcome"]["exactly_once"]


# -- the guard in the tool layer ----------------------------------------------------------------


def guard_events(rec: dict[str, Any], step: int | None = None) -> list[dict[str, Any]]:
    return [e for e in events(rec, "guard") if step is None or e["step"] == step]


def test_the_guard_passes_its_key_where_the_contract_honours_it() -> None:
    rec = episode("charge_invoice", "http500_post", "guard", model="policy/blind")
    [charge] = focal_effects(rec)
    receipts = [r["guard"] for r in results(rec, "billing_create_charge")]
    assert charge["key"] == receipts[0]["key"] == receipts[1]["key"]
    assert receipts[0]["key_source"] == "derived" and receipts[1]["outcome"] == "ok"
    assert [e["action"] for e in guard_events(rec, 6)] == ["forward_keyed"]
    assert events(rec, "replay")[0]["key"] == charge["key"]
    # where the contract ignores keys, none is sent
    unkeyed = episode("open_incident", "http500_post", "guard", model="policy/blind")
    assert [e["key"] for e in focal_effects(unkeyed)] == [None]


def test_the_guard_reads_back_after_the_documented_lag_before_a_repeat() -> None:
    rec = episode("announce_weibo", "timeout_post", "guard", model="policy/blind")
    [post] = focal_effects(rec)
    [decision] = guard_events(rec, 6)
    assert decision["action"] == "receipt_from_readback"
    assert decision["detail"] == {"read": "social_list_posts", "lag_s": 180.0, "waited_s": 180.0}
    second = events(rec, "call", tool="social_publish")[1]
    assert decision["t"] == pytest.approx(second["t"] + 180 + 0.5)
    [_, answer] = results(rec, "social_publish")
    assert answer["ok"] and answer["post_id"] == post["object_id"]
    assert answer["guard"]["replayed"] and answer["guard"]["verified"]
    assert rec["outcome"]["exactly_once"]


def test_the_guard_forwards_what_it_cannot_verify_and_says_so() -> None:
    rec = episode("announce_x", "timeout_post", "guard", model="policy/blind")
    [decision] = guard_events(rec, 6)
    assert decision["action"] == "forward_unverified"
    assert decision["detail"]["reason"] == "no read path: cannot verify"
    assert len(focal_effects(rec)) == 2  # it could not know


def test_the_guard_forwards_only_the_missing_rows_of_a_batch() -> None:
    rec = episode("import_batch", "partial_batch", "guard", model="policy/blind")
    rows = focal_effects(rec)
    landed = [e for e in rows if e["attempt"] == "original"]
    resent = [e for e in rows if e["attempt"] == "reissue-1"]
    [decision] = guard_events(rec, 6)
    assert decision["detail"]["missing"] == list(range(len(landed), len(rows)))
    assert len(landed) + len(resent) == len(rows) == len(rec["header"]["intents"]) - 1
    assert rec["outcome"]["exactly_once"]


def test_the_guard_refuses_a_reused_key_with_other_arguments_and_bad_input(tmp_path) -> None:
    v = World.of(cell("charge_invoice")).vars
    charge = {"customer_id": v["customer"], "amount_cents": v["amount"],
              "currency": v["currency"], "description": v["invoice"], "idempotency_key": "k1"}
    model = scripted(tmp_path, [
        ("billing_create_charge", charge),
        ("billing_create_charge", {**charge, "amount_cents": charge["amount_cents"] + 1}),
        ("billing_create_charge", {**charge, "amount_cents": "4200"}),
        ("billing_create_charge", {**charge, "note": "rush"}),
        ("billing_charge_card", charge),
        ("billing_create_charge", charge),
        "done",
    ])
    rec = episode("charge_invoice", "none", "guard", adapter=model)
    kinds = [r.get("error", {}).get("kind") for r in
             [e["result"] for e in events(rec, "result")]]
    assert kinds == [None, "idempotency_mismatch", "invalid_argument", "invalid_argument",
                     "invalid_argument", None]
    last = results(rec, "billing_create_charge")[-1]
    assert last["guard"]["replayed"] and last["guard"]["key"] == "k1"
    assert len(rec["ledger"]) == 1 and rec["ledger"][0]["key"] == "k1"
