"""The OpenAI Responses API (``POST /v1/responses``) as limbo sees it, both directions.

Adapter side: :func:`request` builds the body for ``client.responses.create`` from the
provider-neutral conversation; :func:`reply` reads the response (or the ``response`` of the
final ``response.completed`` stream event). Gateway side: :func:`parse_request` turns a body a
harness sent into the conversation, :func:`response_body` and :func:`stream_events` answer it.

Requests are self-contained (``store: false``): every turn sends the whole conversation, as
harnesses do, so no server-side state is needed. Codex groups MCP tools into ``namespace``
tools and expects calls to echo the namespace; the flat name ``<namespace>__<name>`` stands
for such a tool inside limbo and :class:`Namespaces` maps it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.episode.models import Message, ModelTurn, ToolCall, ToolDef
from limbo.providers.wire import (
    Reply,
    Tokens,
    args_text,
    error_text,
    merge_assistant,
    none_if_empty,
    parse_args,
    text_of,
)

SEP = "__"


@dataclass
class Namespaces:
    """Flat tool name -> (namespace, name) for tools a request offered inside a namespace."""

    table: dict[str, tuple[str, str]] = field(default_factory=dict)

    def flat(self, namespace: str | None, name: str) -> str:
        if not namespace:
            return name
        flat = f"{namespace}{SEP}{name}"
        self.table[flat] = (namespace, name)
        return flat

    def wire(self, flat: str) -> tuple[str | None, str]:
        return self.table.get(flat, (None, flat))


# ---------------------------------------------------------------- adapter side


def request(messages: list[Message], tools: list[ToolDef], model: str,
            options: dict[str, Any]) -> dict[str, Any]:
    """Body of ``responses.create`` for this conversation."""
    body: dict[str, Any] = {"model": model, "input": _input(messages), "store": False}
    if tools:
        body["tools"] = [_tool(t) for t in tools]
        body["parallel_tool_calls"] = bool(options.get("parallel_tool_calls", True))
    for name in ("temperature", "top_p"):
        if name in options:
            body[name] = options[name]
    if "max_tokens" in options:
        body["max_output_tokens"] = int(options["max_tokens"])
    if "reasoning_effort" in options:
        body["reasoning"] = {"effort": options["reasoning_effort"]}
    return body


def _tool(t: ToolDef) -> dict[str, Any]:
    return {"type": "function", "name": t.name, "description": t.description,
            "parameters": t.parameters, "strict": False}


def _input(messages: list[Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id or "",
                          "output": m.content})
            continue
        if m.content or m.role != "assistant":
            items.append({"type": "message", "role": m.role, "content": m.content})
        for c in m.tool_calls:
            items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                          "arguments": args_text(c.arguments)})
    return items


def reply(response: dict[str, Any]) -> Reply:
    """Text, tool calls and tokens of a Responses ``response`` object."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in response.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            texts.append(text_of(item.get("content")))
        elif kind == "function_call":
            name = item.get("name", "")
            if item.get("namespace"):
                name = f"{item['namespace']}{SEP}{name}"
            calls.append(ToolCall(id=item.get("call_id") or item.get("id") or "", name=name,
                                  arguments=parse_args(item.get("arguments"))))
    return Reply(none_if_empty("".join(texts)), calls, _tokens(response.get("usage")))


def failure(response: dict[str, Any]) -> str | None:
    """What a Responses ``response`` says went wrong, if it says so: ``status: failed`` or an
    ``error`` object."""
    if response.get("error"):
        return error_text(response["error"])
    if response.get("status") == "failed":
        return "status: failed"
    return None


def _tokens(usage: dict[str, Any] | None) -> Tokens:
    if not usage:
        return Tokens()
    details = usage.get("input_tokens_details") or {}
    return Tokens(input=int(usage.get("input_tokens") or 0),
                  cached=int(details.get("cached_tokens") or 0),
                  output=int(usage.get("output_tokens") or 0))


# ---------------------------------------------------------------- gateway side


def parse_request(body: dict[str, Any], ns: Namespaces) -> tuple[list[Message], list[ToolDef]]:
    """The conversation and tools of a Responses request body."""
    messages: list[Message] = []
    if body.get("instructions"):
        messages.append(Message(role="system", content=text_of(body["instructions"])))
    raw = body.get("input") or []
    for item in [{"role": "user", "content": raw}] if isinstance(raw, str) else raw:
        _read_item(item, messages, ns)
    return messages, _tools(body.get("tools") or [], ns)


def _read_item(item: dict[str, Any], messages: list[Message], ns: Namespaces) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role", "user")
        role = "system" if role == "developer" else role
        if role in ("system", "user", "assistant"):
            messages.append(Message(role=role, content=text_of(item.get("content"))))
    elif kind == "function_call":
        call = ToolCall(id=item.get("call_id") or item.get("id") or "",
                        name=ns.flat(item.get("namespace"), item.get("name", "")),
                        arguments=parse_args(item.get("arguments")))
        merge_assistant(messages, "", [call])
    elif kind == "function_call_output":
        messages.append(Message(role="tool", tool_call_id=item.get("call_id"),
                                content=text_of(item.get("output"))))


def _tools(tools: list[dict[str, Any]], ns: Namespaces,
           namespace: str | None = None) -> list[ToolDef]:
    out: list[ToolDef] = []
    for t in tools:
        if t.get("type") == "namespace":
            out.extend(_tools(t.get("tools") or [], ns, t.get("name")))
        elif t.get("type") == "function" and t.get("name"):
            out.append(ToolDef(name=ns.flat(namespace, t["name"]),
                               description=t.get("description") or "",
                               parameters=t.get("parameters") or {"type": "object"}))
    return out


@dataclass(frozen=True)
class Ids:
    """Identifiers of one gateway answer (deterministic: derived from session and turn)."""

    response: str
    prefix: str

    def item(self, i: int, kind: str) -> str:
        return f"{kind}_{self.prefix}_{i}"


def _items(turn: ModelTurn, ids: Ids, ns: Namespaces) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({"type": "message", "id": ids.item(0, "msg"), "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": turn.text, "annotations": []}]})
    for i, call in enumerate(turn.tool_calls):
        namespace, name = ns.wire(call.name)
        item = {"type": "function_call", "id": ids.item(i, "fc"), "call_id": call.id,
                "name": name, "arguments": args_text(call.arguments), "status": "completed"}
        if namespace:
            item["namespace"] = namespace
        items.append(item)
    return items


def _usage(turn: ModelTurn) -> dict[str, Any]:
    u = turn.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
            "output_tokens_details": {"reasoning_tokens": 0}}


def _shell(model: str, ids: Ids, status: str) -> dict[str, Any]:
    return {"id": ids.response, "object": "response", "created_at": 0, "status": status,
            "model": model, "output": [], "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "error": None, "incomplete_details": None, "instructions": None,
            "metadata": {}, "temperature": None, "top_p": None, "usage": None}


def response_body(turn: ModelTurn, model: str, ids: Ids, ns: Namespaces) -> dict[str, Any]:
    """The non-streaming answer."""
    return {**_shell(model, ids, "completed"), "output": _items(turn, ids, ns),
            "usage": _usage(turn)}


def stream_events(turn: ModelTurn, model: str, ids: Ids,
                  ns: Namespaces) -> list[tuple[str | None, dict[str, Any]]]:
    """The streaming answer, in the order the API sends it (see docs/models.md)."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _shell(model, ids, "in_progress")},
        {"type": "response.in_progress", "response": _shell(model, ids, "in_progress")},
    ]
    for index, item in enumerate(_items(turn, ids, ns)):
        events.extend(_item_events(index, item))
    events.append({"type": "response.completed", "response": response_body(turn, model, ids, ns)})
    return [(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        return [
            {"type": "response.output_item.added", "output_index": index,
             "item": {**item, "arguments": "", "status": "in_progress"}},
            {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", **at, "name": item["name"],
             "arguments": item["arguments"]},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    text = item["content"][0]["text"]
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    at_part = {**at, "content_index": 0}
    return [
        {"type": "response.output_item.added", "output_index": index,
         "item": {**item, "content": [], "status": "in_progress"}},
        {"type": "response.content_part.added", **at_part, "part": part},
        {"type": "response.output_text.delta", **at_part, "delta": text, "logprobs": []},
        {"type": "response.output_text.done", **at_part, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at_part, "part": {**part, "text": text}},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]
