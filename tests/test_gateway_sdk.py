"""The model gateway as the official SDKs see it: their own stream parsers
(``responses.stream``, ``chat.completions.stream``, ``messages.stream``) and non-streaming
``create`` accept its answers for all three wire APIs; the event sequences are the ones
harnesses need; harness tool-name prefixes and Codex namespaces are mapped; routing is per
episode; a repeated request is the same turn; only loopback is bound."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import anthropic
import openai
import pytest
from support.cells import cell_for
from support.model_servers import plain
from support.reference import briefed
from support.scripted import scripted

from limbo.base.errors import UsageError
from limbo.episode.briefing import ReferenceAdapter, brief, context
from limbo.episode.models import ModelAdapter, ModelTurn, ToolCall, make_adapter
from limbo.episode.run_one import run_episode
from limbo.gateway import Gateway, ThreadedGateway
from limbo.log.records import Usage
from limbo.providers import chat_api, messages_api, responses_api
from limbo.sim.world import World

CELL = cell_for("charge_invoice", "billing_create_charge")
TURN = ModelTurn(text="Charging now.", tool_calls=[
    ToolCall(id="call_a", name="billing_list_charges", arguments={"customer_id": "cus_122"}),
    ToolCall(id="call_b", name="billing_create_charge", arguments={"customer_id": "cus_122",
             "amount_cents": 100, "currency": "eur", "description": "x"})],
    usage=Usage(input_tokens=120, cached_input_tokens=20, output_tokens=7))
TOOLS = [{"name": "billing_list_charges", "description": "List charges.",
          "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}}},
         {"name": "billing_create_charge", "description": "Charge.",
          "parameters": {"type": "object", "properties": {}}}]
USER = "Charge invoice INV-0031."


@pytest.fixture(scope="module")
def world():
    return World.of(CELL)


@pytest.fixture(scope="module")
def ctx(world):
    return context(world)


def session(gw, ctx, adapter, name):
    gw.close(name)
    return gw.open(name, adapter, ctx)


def oa(gw, name):
    return openai.AsyncOpenAI(api_key="k-dummy", base_url=gw.base_url(name), max_retries=0)


def an(gw, name):
    return anthropic.AsyncAnthropic(api_key="k-dummy", base_url=gw.base_url(name, "anthropic"),
                                    max_retries=0)


def responses_tools():
    return [{"type": "function", **t} for t in TOOLS]


def chat_tools():
    return [{"type": "function", "function": t} for t in TOOLS]


def anthropic_tools():
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in TOOLS]


def test_responses_stream_parser_accepts_text_and_parallel_calls(gw, ctx, tmp_path) -> None:
    session(gw, ctx, scripted(tmp_path, [TURN]), "r-stream")

    async def go():
        async with oa(gw, "r-stream").responses.stream(
                model="m", input=USER, tools=responses_tools()) as stream:
            kinds = [event.type async for event in stream]
            return kinds, await stream.get_final_response()

    kinds, final = asyncio.run(go())
    text_item = ["response.output_item.added", "response.content_part.added",
                 "response.output_text.delta", "response.output_text.done",
                 "response.content_part.done", "response.output_item.done"]
    call_item = ["response.output_item.added", "response.function_call_arguments.delta",
                 "response.function_call_arguments.done", "response.output_item.done"]
    assert kinds == ["response.created", "response.in_progress", *text_item, *call_item,
                     *call_item, "response.completed"]
    assert final.output_text == "Charging now."
    calls = [o for o in final.output if o.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        (c.id, c.name, c.arguments) for c in TURN.tool_calls]
    assert final.usage.input_tokens == 120 and final.usage.input_tokens_details.cached_tokens == 20


def test_chat_stream_parser_accepts_text_and_parallel_calls(gw, ctx, tmp_path) -> None:
    session(gw, ctx, scripted(tmp_path, [TURN]), "c-stream")

    async def go():
        async with oa(gw, "c-stream").chat.completions.stream(
                model="m", messages=[{"role": "user", "content": USER}], tools=chat_tools(),
                stream_options={"include_usage": True}) as stream:
            return await stream.get_final_completion()

    final = asyncio.run(go())
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Charging now."
    assert [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in choice.message.tool_calls] == [(c.id, c.name, c.arguments) for c in TURN.tool_calls]
    assert final.usage.prompt_tokens == 120 and final.usage.completion_tokens == 7


def test_messages_stream_parser_accepts_text_and_parallel_calls(gw, ctx, tmp_path) -> None:
    session(gw, ctx, scripted(tmp_path, [TURN]), "m-stream")

    async def go():
        async with an(gw, "m-stream").messages.stream(
                model="m", max_tokens=100, messages=[{"role": "user", "content": USER}],
                tools=anthropic_tools()) as stream:
            kinds = [event.type async for event in stream]
            return kinds, await stream.get_final_message()

    kinds, final = asyncio.run(go())
    raw = [k for k in kinds if k in ("message_start", "content_block_start", "content_block_delta",
                                     "content_block_stop", "message_delta", "message_stop")]
    block = ["content_block_start", "content_block_delta", "content_block_stop"]
    assert raw == ["message_start", *block * 3, "message_delta", "message_stop"]
    assert final.stop_reason == "tool_use" and final.content[0].text == "Charging now."
    assert [(b.id, b.name, b.input) for b in final.content[1:]] == [
        (c.id, c.name, c.arguments) for c in TURN.tool_calls]
    assert final.usage.input_tokens == 100 and final.usage.cache_read_input_tokens == 20


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_non_streaming_answers_parse(gw, ctx, tmp_path, api) -> None:
    session(gw, ctx, scripted(tmp_path, ["Done."]), f"plain-{api}")

    async def go():
        if api == "responses":
            return (await oa(gw, f"plain-{api}").responses.create(model="m", input=USER)).output_text
        if api == "chat":
            out = await oa(gw, f"plain-{api}").chat.completions.create(
                model="m", messages=[{"role": "user", "content": USER}])
            return out.choices[0].message.content
        out = await an(gw, f"plain-{api}").messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": USER}])
        return out.content[0].text

    assert asyncio.run(go()) == "Done."


def test_codex_namespace_tools_are_echoed_and_the_policy_sees_plain_names(gw, world, ctx) -> None:
    """Codex offers MCP tools inside a namespace and rejects a call without it; its tool output
    comes back as an array of input_text parts."""
    s = session(gw, ctx, briefed(world), "codex")
    tools = [{"type": "namespace", "name": "mcp__sandbox", "tools": responses_tools()}]

    async def turn(inputs):
        return await oa(gw, "codex").responses.create(model="m", input=inputs, tools=tools,
                                                      stream=False)

    first = asyncio.run(turn([{"role": "user", "content": USER}]))
    call = first.output[0]
    assert (call.namespace, call.name) == ("mcp__sandbox", "billing_create_charge")
    result = {"ok": True, "charge": {"charge_id": "ch_1", "customer_id": "cus_122"}}
    history = [{"role": "user", "content": USER},
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "namespace": call.namespace, "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id,
                "output": [{"type": "input_text", "text": json.dumps(result)}]}]
    second = asyncio.run(turn(history))
    assert second.output[0].name == "tickets_add_comment"
    assert "ch_1" in json.loads(second.output[0].arguments)["body"]  # it read our result
    assert s.turns == 2


@pytest.mark.parametrize(("api", "prefix"), [("messages", "mcp__sandbox__"), ("chat", "sandbox-")])
def test_harness_tool_prefixes_are_stripped_and_restored(gw, ctx, tmp_path, api, prefix) -> None:
    seen = []
    inner = scripted(tmp_path, [TURN])

    class Spy(ModelAdapter):
        async def generate(self, messages, tools, ctx):
            seen.extend(t.name for t in tools)
            return await inner.generate(messages, tools, ctx)

    session(gw, ctx, Spy("spy"), f"pre-{api}")
    prefixed = [{**t, "name": prefix + t["name"]} for t in TOOLS]

    async def go():
        if api == "chat":
            out = await oa(gw, f"pre-{api}").chat.completions.create(
                model="m", messages=[{"role": "user", "content": USER}],
                tools=[{"type": "function", "function": t} for t in prefixed])
            return [c.function.name for c in out.choices[0].message.tool_calls]
        out = await an(gw, f"pre-{api}").messages.create(
            model="m", max_tokens=10, messages=[{"role": "user", "content": USER}],
            tools=[{"name": t["name"], "description": "", "input_schema": t["parameters"]}
                   for t in prefixed])
        return [b.name for b in out.content if b.type == "tool_use"]

    names = asyncio.run(go())
    assert seen == [t["name"] for t in TOOLS]
    assert names == [prefix + c.name for c in TURN.tool_calls]


def test_a_repeated_request_is_the_same_turn_not_a_new_one(gw, world, ctx) -> None:
    s = session(gw, ctx, briefed(world), "again")

    async def ask():
        out = await oa(gw, "again").chat.completions.create(
            model="m", messages=[{"role": "user", "content": USER}], tools=chat_tools())
        return out.choices[0].message.tool_calls[0].function.name

    assert asyncio.run(ask()) == asyncio.run(ask()) == "billing_create_charge"
    assert (s.requests, s.turns) == (2, 1)


def _post(url, body, headers=None):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def test_routing_by_path_header_or_single_session(ctx, tmp_path) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": USER}]}
    with ThreadedGateway() as gw:
        one = scripted(tmp_path, ["a", "b"], "one.json")
        gw.open("one", one, ctx)
        assert _post(f"{gw.url}/v1/chat/completions", body)[1]["choices"][0]["message"]["content"] == "a"
        gw.open("two", scripted(tmp_path, ["c"], "two.json"), ctx)
        status, err = _post(f"{gw.url}/v1/chat/completions", body)
        assert status == 404 and "no gateway session" in err["error"]["message"]
        assert _post(f"{gw.url}/v1/chat/completions", body,
                     {"X-Limbo-Episode": "two"})[1]["choices"][0]["message"]["content"] == "c"
        assert _post(f"{gw.base_url('one')}/chat/completions", {**body, "messages": [
            {"role": "user", "content": "other"}]})[1]["choices"][0]["message"]["content"] == "b"
        assert _post(f"{gw.url}/ep/nobody/v1/responses", {"input": "x"})[0] == 404
        with urllib.request.urlopen(f"{gw.base_url('one')}/models", timeout=10) as resp:
            assert json.load(resp)["data"][0]["id"] == one.spec
        counted = _post(f"{gw.base_url('one', 'anthropic')}/v1/messages/count_tokens", body)
        assert counted[0] == 200 and counted[1]["input_tokens"] > 0


def test_the_gateway_binds_loopback_only() -> None:
    with pytest.raises(UsageError, match="loopback"):
        Gateway(host="0.0.0.0")
    with ThreadedGateway() as gw:
        assert gw.url.startswith("http://127.0.0.1:")


def test_hooks_see_every_turn_and_can_answer_side_requests(gw, world, ctx) -> None:
    """A harness's side request (no tools: a title, a topic check) is answered by the hook and
    does not advance the reference policy; real turns reach ``after_turn``."""
    answered = []

    def before(messages, tools):
        return None if tools else ModelTurn(text="A title")

    s = session(gw, ctx, briefed(world), "hooks")
    s.before_turn, s.after_turn = before, answered.append
    client = "hooks"

    async def ask(tools):
        out = await oa(gw, client).chat.completions.create(
            model="m", messages=[{"role": "user", "content": USER}], **tools)
        return out.choices[0].message

    assert asyncio.run(ask({})).content == "A title"
    assert asyncio.run(ask({"tools": chat_tools()})).tool_calls[0].function.name == \
        "billing_create_charge"
    assert s.turns == 1 and [t.text for t in answered] == ["A title", None]


class HelperAdapter(ReferenceAdapter):
    """Each turn through the SDK's own high-level stream helper and its accumulated final
    object (not our adapters' accumulation), against a gateway session backed by
    ``policy/verify`` (briefed with the episode's answer key)."""

    provider = "helper"

    def __init__(self, gw, api) -> None:
        super().__init__(api)
        self.gw, self.api, self.client = gw, api, None

    async def generate(self, messages, tools, ctx):
        if self.client is None:
            name = f"helper-{self.api}-{ctx.episode_id}"
            policy = make_adapter("policy/verify")
            brief(policy, self.key())
            session(self.gw, ctx, policy, name)
            self.client = an(self.gw, name) if self.api == "messages" else oa(self.gw, name)
        if self.api == "responses":
            body = responses_api.request(messages, tools, "m", {})
            async with self.client.responses.stream(**body) as stream:
                reply = responses_api.reply((await stream.get_final_response()).to_dict())
        elif self.api == "chat":
            body = chat_api.request(messages, tools, "m", {})
            async with self.client.chat.completions.stream(
                    **body, stream_options={"include_usage": True}) as stream:
                reply = chat_api.reply((await stream.get_final_completion()).to_dict())
        else:
            body = messages_api.request(messages, tools, "m", {})
            async with self.client.messages.stream(**body) as stream:
                reply = messages_api.reply((await stream.get_final_message()).to_dict())
        return ModelTurn(text=reply.text, tool_calls=reply.tool_calls)

    async def aclose(self):
        if self.client is not None:
            await self.client.close()


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_sdk_stream_helpers_drive_a_full_episode_like_the_in_process_run(gw, api) -> None:
    cell = cell_for("charge_invoice", "billing_create_charge", fault="timeout_post")
    reference = run_episode(cell)
    record = run_episode(cell, HelperAdapter(gw, api))
    assert record["outcome"]["termination"] == "finished"
    assert plain(record) == plain(reference)
