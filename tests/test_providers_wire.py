"""Wire conversions, prices and the retry policy, without a network.

The adapters' request builders and the gateway's request parsers are inverse to each other, and
so are the gateway's answers and the adapters' readers — for every API, streamed and not — so a
conversation survives ``adapter -> wire -> gateway`` and a turn survives ``gateway -> wire ->
adapter`` unchanged (tool arguments that are not JSON included)."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from limbo.base.errors import ModelError, UsageError
from limbo.base.secrets import scrub
from limbo.episode.models import Message, ModelTurn, ToolCall, ToolDef
from limbo.log.records import Usage
from limbo.providers import chat_api, messages_api, pricing, responses_api
from limbo.providers.encoded import wire_bytes
from limbo.providers.retry import Retryable, RetryPolicy, retry_after, with_retries
from limbo.providers.wire import Tokens, parse_args

TOOLS = [ToolDef(name="billing_list_charges", description="List.",
                 parameters={"type": "object", "properties": {"customer_id": {"type": "string"}}}),
         ToolDef(name="finish", description="End.", parameters={"type": "object"})]
CALLS = [ToolCall(id="c1", name="billing_list_charges", arguments={"customer_id": "cus_1"}),
         ToolCall(id="c2", name="finish", arguments={"status": "completed", "summary": "ok"})]
BAD = ToolCall(id="c3", name="billing_list_charges", arguments='{"customer_id": ')
CONVERSATION = [
    Message(role="system", content="Be careful."),
    Message(role="user", content="Do the task."),
    Message(role="assistant", content="Looking.", tool_calls=CALLS),
    Message(role="tool", tool_call_id="c1", content='{"ok": true, "items": []}'),
    Message(role="tool", tool_call_id="c2", content='{"ok": false, "error": {"kind": "x"}}'),
    Message(role="user", content="Did that write take effect?"),
    Message(role="assistant", tool_calls=[BAD]),
    Message(role="tool", tool_call_id="c3", content='{"ok": false}'),
]
TURN = ModelTurn(text="Two calls.", tool_calls=[*CALLS, BAD],
                 usage=Usage(input_tokens=900, cached_input_tokens=100, output_tokens=40))


def _responses_parse(body):
    return responses_api.parse_request(body, responses_api.Namespaces())


@pytest.mark.parametrize(("build", "parse"), [
    (responses_api.request, _responses_parse),
    (chat_api.request, chat_api.parse_request),
    (messages_api.request, messages_api.parse_request),
], ids=["responses", "chat", "messages"])
def test_a_conversation_survives_adapter_to_gateway(build, parse) -> None:
    body = build(CONVERSATION, TOOLS, "m", {"temperature": 0})
    messages, tools = parse(body)
    assert messages == CONVERSATION
    assert tools == TOOLS
    assert body["temperature"] == 0


def test_request_bytes_are_the_body_as_json_whatever_was_encoded_before() -> None:
    """The stored encoding of a toolset's ``tools`` is reused only where it is right: each API
    in turn with the same definitions, a copy of them, and a field that changed under the
    same definitions all come out as ``json.dumps`` of the body."""
    def sent(body, tools=TOOLS):
        return wire_bytes(body, tools)

    for _ in range(2):
        for build in (responses_api.request, chat_api.request, messages_api.request):
            body = build(CONVERSATION, TOOLS, "m", {"temperature": 0.5})
            assert sent(body) == json.dumps(body, ensure_ascii=False,
                                            separators=(",", ":")).encode()
            assert json.loads(sent(body, [t.model_copy() for t in TOOLS])) == body
    body = chat_api.request(CONVERSATION, TOOLS, "m", {})
    body["tools"][0]["function"]["description"] = "Changed."
    assert json.loads(sent(body))["tools"][0]["function"]["description"] == "Changed."
    assert json.loads(sent({"model": "m"}, [])) == {"model": "m"}


def _ids():
    return responses_api.Ids("resp_1", "t")


READERS = {
    "responses": lambda t: responses_api.reply(
        responses_api.response_body(t, "m", _ids(), responses_api.Namespaces())),
    "responses-stream": lambda t: responses_api.reply(responses_api.stream_events(
        t, "m", _ids(), responses_api.Namespaces())[-1][1]["response"]),
    "chat": lambda t: chat_api.reply(chat_api.response_body(t, "m", "c")),
    "chat-stream": lambda t: _accumulate(chat_api.ChatAccumulator(),
                                         chat_api.stream_events(t, "m", "c", True)[:-1]),
    "messages": lambda t: messages_api.reply(messages_api.response_body(t, "m", "i")),
    "messages-stream": lambda t: _accumulate(messages_api.MessagesAccumulator(),
                                             messages_api.stream_events(t, "m", "i")),
}


def _accumulate(acc, events):
    for _, data in events:
        acc.add(data)
    assert acc.done
    return acc.reply()


@pytest.mark.parametrize("reader", list(READERS))
def test_a_turn_survives_gateway_to_adapter(reader) -> None:
    reply = READERS[reader](TURN)
    assert (reply.text, reply.tool_calls) == (TURN.text, TURN.tool_calls)
    assert reply.tokens == Tokens(input=900, cached=100, output=40)
    empty = READERS[reader](ModelTurn(text=None, tool_calls=[CALLS[0]]))
    assert empty.text is None and empty.tool_calls == [CALLS[0]]


def test_responses_stream_numbers_its_events_and_ends_with_completed() -> None:
    events = responses_api.stream_events(TURN, "m", _ids(), responses_api.Namespaces())
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"


def test_anthropic_cache_reads_and_writes_fold_into_input() -> None:
    reply = messages_api.reply({"content": [], "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 90,
        "output_tokens": 7}})
    assert reply.tokens == Tokens(input=600, cached=500, cache_write=90, output=7)


def test_tool_arguments_that_are_not_a_json_object_stay_text() -> None:
    assert parse_args('{"a": 1}') == {"a": 1}
    assert parse_args("") == {}
    assert parse_args('{"a": ') == '{"a": '
    assert parse_args("[1, 2]") == "[1, 2]"


def test_prices_cost_and_unknown_models(tmp_path, monkeypatch) -> None:
    price = pricing.price_for("openai/gpt-4.1")
    assert price is not None
    tokens = Tokens(input=1_000_000, cached=400_000, output=100_000)
    assert price.cost(tokens) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0)
    assert pricing.price_for("openai/gpt-4.1-2025-04-14") == price
    assert pricing.price_for("anthropic/claude-sonnet-4-5-20250929") is not None
    assert pricing.price_for("openai/gpt-4.1-turbo-ultra") is None
    assert pricing.cost(None, tokens) is None
    assert pricing.cost(None, Tokens()) == 0.0
    write = pricing.price_for("anthropic/claude-sonnet-4-5")
    assert write.cost(Tokens(input=1_000_000, cache_write=1_000_000)) == pytest.approx(3.75)
    mine = tmp_path / "mine.toml"
    mine.write_text('["openai/gpt-4.1"]\ninput = 1\noutput = 1\n["openai/local"]\ninput = 0\noutput = 0\n')
    monkeypatch.setenv("LIMBO_PRICES", str(mine))
    assert pricing.price_for("openai/gpt-4.1").input == 1
    assert pricing.cost(pricing.price_for("openai/local"), tokens) == 0.0
    bad = tmp_path / "bad.toml"
    bad.write_text('["openai/x"]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(UsageError, match="bad entry"):
        pricing.price_for("openai/x", str(bad))


def test_retry_after_headers() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT",
                        "date": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 30.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_backoff_is_bounded_jittered_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_s=1.0, cap_s=8.0, max_retry_after_s=60.0)
    rng = random.Random(0)
    for n in range(1, 9):
        assert 0.5 * min(8.0, 2 ** (n - 1)) <= policy.delay(n, rng, None) <= min(8.0, 2 ** (n - 1))
    assert policy.delay(1, rng, 12.0) == 12.0
    assert policy.delay(1, rng, 600.0) == 60.0


def test_with_retries_stops_on_a_non_retryable_failure_and_when_attempts_run_out() -> None:
    waits: list[float] = []

    async def sleep(s):
        waits.append(s)

    policy = RetryPolicy(max_attempts=3, sleep=sleep)
    attempts = []

    async def flaky():
        attempts.append(1)
        raise ConnectionError("reset")

    def classify(exc):
        return Retryable("reset") if isinstance(exc, ConnectionError) else None

    with pytest.raises(ModelError, match="gave up after 3 attempts"):
        asyncio.run(with_retries(flaky, policy, classify, lambda: random.Random(1), "m"))
    assert len(attempts) == 3 and len(waits) == 2

    async def broken():
        raise KeyError("not a provider failure")

    with pytest.raises(KeyError):
        asyncio.run(with_retries(broken, policy, classify, lambda: random.Random(1), "m"))


def test_a_refusal_is_not_now_and_a_failure_is_wrong() -> None:
    from limbo.providers.base import refusal

    assert refusal(429, None, None) and refusal(429, "rate_limit_exceeded", 2.0)
    assert refusal(529, "overloaded_error", None)
    assert refusal(503, None, 5.0) and not refusal(503, None, None)  # down, for all we know
    assert not refusal(429, "insufficient_quota", None)  # a spent balance: waiting won't help
    assert not refusal(500, None, 5.0) and not refusal(408, None, None)


def test_refusals_spend_their_own_budget_not_the_attempts() -> None:
    waits: list[float] = []

    async def sleep(s):
        waits.append(s)

    answers = ["refused"] * 9 + ["failed"] * 2 + ["refused", "ok"]

    async def busy():
        what = answers.pop(0)
        if what != "ok":
            raise ConnectionError(what)
        return what

    def classify(exc):
        return Retryable(str(exc), 2.0 if str(exc) == "refused" else None,
                         refused=str(exc) == "refused")

    policy = RetryPolicy(max_attempts=3, max_refused_s=30, sleep=sleep)
    assert asyncio.run(with_retries(busy, policy, classify, lambda: random.Random(1), "m")) == "ok"
    assert waits[:9] == [2.0] * 9 and len(waits) == 12
    answers[:] = ["refused"] * 20
    with pytest.raises(ModelError, match="gave up when refused for 30 s"):
        asyncio.run(with_retries(busy, policy, classify, lambda: random.Random(1), "m"))


def test_scrub_masks_credentials(monkeypatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-abcdefgh1234")
    text = scrub("a tok-abcdefgh1234 b sk-proj-ABCDEFGHIJKLMNOP c sk-ant-abcdefghijklmnop d")
    assert text == "a *** b *** c *** d"


def test_adapters_report_their_price_for_the_cli() -> None:
    from limbo.providers.anthropic import AnthropicAdapter
    from limbo.providers.openai import OpenAIAdapter
    from limbo.providers.replay import ReplayAdapter

    assert OpenAIAdapter.price_per_mtok("gpt-4.1", {}) == {
        "input": 2.0, "cached_input": 0.5, "output": 8.0}
    assert OpenAIAdapter.price_per_mtok("my-local-model", {}) is None
    assert AnthropicAdapter.price_per_mtok("claude-haiku-4-5-20251001", {})["output"] == 5.0
    assert ReplayAdapter.price_per_mtok("runs/x", {})["input"] == 0.0


def test_limbo_imports_without_any_vendor_sdk() -> None:
    """With openai, anthropic and their HTTP client unimportable, limbo, its providers and the
    gateway import, and asking for an SDK-backed model names the extra to install."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "for name in ('openai', 'anthropic', 'httpx2', 'httpx'):\n"
        "    sys.modules[name] = None\n"
        "import limbo, limbo.providers, limbo.gateway\n"
        "from limbo.base.registry import entries\n"
        "from limbo.episode.models import make_adapter\n"
        "from limbo.base.errors import UsageError\n"
        "assert {'openai', 'anthropic', 'replay', 'policy'} <= set(entries('model'))\n"
        "for spec in ('openai/gpt-4.1', 'anthropic/claude-sonnet-4-5'):\n"
        "    try:\n"
        "        make_adapter(spec)\n"
        "    except UsageError as exc:\n"
        "        print(exc)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["model openai/gpt-4.1 needs the openai SDK: pip install 'limbo-bench[openai]'",
                   "model anthropic/claude-sonnet-4-5 needs the anthropic SDK: "
                   "pip install 'limbo-bench[anthropic]'"]


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/",
                                      "https://api.example.org", "http://h:1/proxy/openai/v1"])
@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/v1/messages"])
def test_a_path_is_joined_to_the_base_url_exactly_as_the_sdk_joins_it(base_url: str, path: str):
    """The adapters hand the SDK absolute URLs (:func:`limbo.providers.base.absolute`): each
    must be the URL the SDK itself would have built from the path, for both SDKs."""
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    from limbo.providers.encoded import absolute

    for client in (AsyncOpenAI(api_key="k", base_url=base_url),
                   AsyncAnthropic(api_key="k", base_url=base_url)):
        assert absolute(client, path) == str(client._prepare_url(path))
        assert absolute(client, path) == absolute(client, path)  # the second from the memo
