"""Full episodes through the official OpenAI and Anthropic SDKs, over real HTTP, against the
model gateway on 127.0.0.1 speaking each wire format (Responses, Chat Completions, Messages;
streaming and not), backed by the reference policy ``verify``.

What must hold: tool calls are executed, results go back, ``finish`` is reached and graded —
and the record is the same as the in-process run of the same cell. Provider failures staged by
the gateway are retried where retryable (the record does not change), a malformed tool-call
argument is the model's mistake (``invalid_argument``, the episode goes on), and exhausted
retries end the episode as ``model_error``, recorded — never a crash, never a lost record.
"""

from __future__ import annotations

import pytest
from support.model_servers import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    IDS,
    VARIANTS,
    Bridge,
    MalformedFirst,
    plain,
)
from support.scripted import scripted
from support.staged import Drop, HttpError, StreamError, Truncate

from limbo.base.errors import UsageError
from limbo.episode.models import ModelTurn, ToolCall
from limbo.episode.run_one import run_episode
from limbo.providers.retry import RetryPolicy

FAULTS = ["none", "timeout_post", "http500_post"]


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.delenv("LIMBO_CACHE_DIR", raising=False)


@pytest.fixture(scope="module")
def cell():
    from support.cells import cell_for

    return cell_for("charge_invoice", "billing_create_charge")


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS, ids=IDS)
@pytest.mark.parametrize("fault", FAULTS)
def test_episode_through_sdk_matches_in_process_run(gw, label, provider, params, fault) -> None:
    from support.cells import cell_for

    cell = cell_for("charge_invoice", "billing_create_charge", fault=fault)
    reference = run_episode(cell)
    bridge = Bridge(gw, provider, params)
    record = run_episode(cell, bridge)
    out = record["outcome"]
    assert out["termination"] == "finished" and record["report"] is not None
    assert out["model_turns"] >= 3 and out["tool_calls"] >= 2
    assert [e for e in record["events"] if e["type"] == "result"], "tool results went back"
    assert plain(record) == plain(reference)
    assert bridge.session.requests == out["model_turns"]  # one HTTP request per turn
    assert bridge.inner.calls == out["model_turns"]
    if fault == "timeout_post":  # the policy read back after the ambiguous failure
        assert "billing_list_charges" in [e["tool"] for e in record["events"] if e["type"] == "call"]


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS, ids=IDS)
def test_malformed_tool_arguments_are_the_models_mistake(gw, cell, label, provider, params) -> None:
    bridge = Bridge(gw, provider, params, backing=lambda: MalformedFirst("billing_create_charge"))
    record = run_episode(cell, bridge)
    first = next(e for e in record["events"] if e["type"] == "result")
    assert first["id"] == "bad_1"
    assert first["result"]["error"]["kind"] == "invalid_argument"
    assert "not valid JSON" in first["result"]["error"]["message"]
    out = record["outcome"]
    assert out["termination"] == "finished" and out["exactly_once"] and out["task_success"]
    assert bridge.sleeps.waits == []  # not a provider failure: nothing retried


RETRYABLE = [
    ("429-retry-after", HttpError(429, retry_after_s=7)),
    ("500", HttpError(500)),
    ("529-overloaded", HttpError(529)),
    ("dropped-connection", Drop()),
    ("truncated", Truncate(events=2)),
    ("truncated-clean", Truncate(events=2, clean=True)),
    ("error-in-stream", StreamError("server_error")),
]


def _stream_only(injection: object) -> bool:
    return isinstance(injection, StreamError) or (isinstance(injection, Truncate)
                                                  and injection.clean)


# Failures that only a stream can have (an error event inside it, a cleanly closed body cut
# short) are paired with the streaming variants only.
RETRY_CASES = [
    pytest.param(label, provider, params, what, injection, id=f"{what}-{label}")
    for what, injection in RETRYABLE
    for label, provider, params in VARIANTS
    if params.get("stream") or not _stream_only(injection)
]


@pytest.mark.parametrize(("label", "provider", "params", "what", "injection"), RETRY_CASES)
def test_retryable_failures_are_retried_and_leave_the_record_unchanged(
        gw, cell, label, provider, params, what, injection) -> None:
    if isinstance(injection, StreamError) and provider == "anthropic":
        injection = StreamError("overloaded_error")
    reference = run_episode(cell)
    bridge = Bridge(gw, provider, params, inject={2: injection})
    record = run_episode(cell, bridge)
    assert plain(record) == plain(reference)
    assert bridge.requests == reference["outcome"]["model_turns"] + 1  # one retried
    assert bridge.session.requests == reference["outcome"]["model_turns"] + isinstance(
        injection, Truncate)  # a cut answer was the gateway's; a staged failure never reached it
    assert bridge.session.turns == reference["outcome"]["model_turns"]  # the policy did not skip
    assert len(bridge.sleeps.waits) == 1
    if what == "429-retry-after":
        assert bridge.sleeps.waits == [7.0]
    else:
        assert 0.5 <= bridge.sleeps.waits[0] <= 1.0  # first backoff: base 1 s x jitter [0.5, 1]


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::3], ids=IDS[::3])
def test_exhausted_retries_end_the_episode_as_model_error_with_a_full_record(
        gw, cell, label, provider, params) -> None:
    inject = {n: HttpError(500) for n in range(3, 3 + 5)}
    bridge = Bridge(gw, provider, params, inject=inject)
    record = run_episode(cell, bridge)
    out = record["outcome"]
    assert out["termination"] == "model_error"
    assert "gave up after 5 attempts" in out["termination_reason"]
    assert "HTTP 500" in out["termination_reason"]
    assert out["model_turns"] == 3 and len(record["usage"]) == 2  # turns 1-2 answered
    assert record["ledger"] and record["events"][-1]["type"] == "limit"
    assert len(bridge.sleeps.waits) == 4
    assert all(0.5 * 2 ** i <= w <= 2 ** i for i, w in enumerate(bridge.sleeps.waits))
    assert bridge.inner.calls == 2 + 5


UNSTREAMED = [v for v in VARIANTS if not v[2].get("stream")]


@pytest.mark.parametrize(("label", "provider", "params"), UNSTREAMED,
                         ids=[v[0] for v in UNSTREAMED])
def test_a_call_refused_more_often_than_its_attempts_is_answered_in_the_end(
        gw, cell, label, provider, params) -> None:
    # A busy endpoint refuses the same call seven times (429 + Retry-After), more than the
    # five attempts a failing call gets, then takes it: a refusal is "not yet", not a failure.
    reference = run_episode(cell)
    refused = {n: HttpError(429, retry_after_s=0.01) for n in range(2, 2 + 7)}
    bridge = Bridge(gw, provider, params, inject=refused)
    record = run_episode(cell, bridge)
    assert record["outcome"]["termination"] == "finished"
    assert plain(record) == plain(reference)
    assert bridge.requests == reference["outcome"]["model_turns"] + 7
    assert bridge.sleeps.waits == [0.01] * 7  # the server's Retry-After, each time


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::3], ids=IDS[::3])
def test_failures_between_refusals_still_spend_the_attempts(gw, cell, label, provider,
                                                             params) -> None:
    staged = [HttpError(500), HttpError(429, retry_after_s=0.01)] * 4 + [HttpError(500)]
    bridge = Bridge(gw, provider, params, inject=dict(enumerate(staged, start=2)))
    record = run_episode(cell, bridge)
    assert record["outcome"]["termination"] == "model_error"
    assert "gave up after 5 attempts; last error" in record["outcome"]["termination_reason"]
    assert bridge.inner.calls == 1 + len(staged)


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::3], ids=IDS[::3])
def test_a_server_that_refuses_forever_ends_the_episode(gw, cell, label, provider,
                                                        params) -> None:
    # Retry-After: 0 forever: each refusal is charged at least a second of the budget.
    forever = {n: HttpError(429, retry_after_s=0) for n in range(2, 40)}
    bridge = Bridge(gw, provider, params, inject=forever, policy=RetryPolicy(max_refused_s=6))
    record = run_episode(cell, bridge)
    out = record["outcome"]
    assert out["termination"] == "model_error"
    assert "gave up when refused for 6 s" in out["termination_reason"]
    assert "HTTP 429" in out["termination_reason"]
    assert bridge.inner.calls == 1 + 7 and bridge.sleeps.waits == [0.0] * 6  # the 7th: no wait left


def test_backoff_jitter_comes_from_the_cells_seed(gw, cell) -> None:
    def waits(seed: int) -> list[float]:
        bridge = Bridge(gw, "openai", {}, inject={1: HttpError(500), 2: HttpError(503)})
        run_episode(cell.model_copy(update={"seed": seed}), bridge)
        return bridge.sleeps.waits

    assert waits(0) == waits(0)
    assert waits(0) != waits(1)


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::3], ids=IDS[::3])
def test_a_bad_request_is_not_retried(gw, cell, label, provider, params) -> None:
    bridge = Bridge(gw, provider, params, inject={1: HttpError(400)})
    record = run_episode(cell, bridge)
    assert record["outcome"]["termination"] == "model_error"
    assert "HTTP 400" in record["outcome"]["termination_reason"]
    assert bridge.inner.calls == 1 and bridge.sleeps.waits == []


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS[::3], ids=IDS[::3])
def test_a_rejected_key_is_the_users_problem(gw, cell, label, provider, params) -> None:
    bridge = Bridge(gw, provider, params, inject={1: HttpError(401)})
    with pytest.raises(UsageError, match="rejected the API key") as info:
        run_episode(cell, bridge)
    assert "LIMBOTESTSECRET" not in str(info.value)


@pytest.mark.parametrize(("label", "provider", "params"), VARIANTS, ids=IDS)
def test_parallel_tool_calls_run_in_the_order_given(gw, cell, tmp_path, label, provider,
                                                    params) -> None:
    reads = [ToolCall(id="r1", name="billing_list_charges", arguments={"customer_id": "cus_122"}),
             ToolCall(id="r2", name="tickets_list_recent", arguments={"limit": 5}),
             ToolCall(id="r3", name="wait", arguments={"seconds": 10})]
    done = ToolCall(id="f", name="finish", arguments={"status": "failed", "summary": "only read"})
    turns = [ModelTurn(text="Reading first.", tool_calls=reads), ModelTurn(tool_calls=[done])]
    record = run_episode(cell, Bridge(gw, provider, params,
                                      backing=lambda: scripted(tmp_path, turns)))
    calls = [(e["id"], e["tool"]) for e in record["events"] if e["type"] == "call"]
    assert calls == [(c.id, c.name) for c in reads]
    results = [e for e in record["events"] if e["type"] == "result"]
    assert [r["id"] for r in results] == ["r1", "r2", "r3"] and all(r["result"]["ok"] for r in results)
    turn = next(e for e in record["events"] if e["type"] == "turn")
    assert turn["text"] == "Reading first."
    assert record["report"]["status"] == "failed" and record["outcome"]["model_turns"] == 2
