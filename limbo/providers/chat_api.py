"""OpenAI Chat Completions (``POST /v1/chat/completions``) as limbo sees it, both directions.

The format most OpenAI-compatible servers speak (vLLM, llama.cpp, Ollama, ...). Adapter side:
:func:`request`, :func:`reply` (a full completion) and :class:`ChatAccumulator` (stream chunks).
Gateway side: :func:`parse_request`, :func:`response_body`, :func:`stream_events`.
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
    none_if_empty,
    parse_args,
    text_of,
)

# ---------------------------------------------------------------- adapter side


def request(messages: list[Message], tools: list[ToolDef], model: str,
            options: dict[str, Any]) -> dict[str, Any]:
    """Body of ``chat.completions.create`` for this conversation."""
    body: dict[str, Any] = {"model": model, "messages": [_message(m) for m in messages]}
    if tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]
        body["parallel_tool_calls"] = bool(options.get("parallel_tool_calls", True))
    for name in ("temperature", "top_p", "seed"):
        if name in options:
            body[name] = options[name]
    if "max_tokens" in options:
        body["max_completion_tokens"] = int(options["max_tokens"])
    if "reasoning_effort" in options:
        body["reasoning_effort"] = options["reasoning_effort"]
    return body


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": args_text(c.arguments)}} for c in m.tool_calls]
    return out


def reply(completion: dict[str, Any]) -> Reply:
    """Text, tool calls and tokens of a ``chat.completion``."""
    choices = completion.get("choices") or [{}]
    msg = choices[0].get("message") or {}
    calls = [ToolCall(id=c.get("id") or "", name=(c.get("function") or {}).get("name", ""),
                      arguments=parse_args((c.get("function") or {}).get("arguments")))
             for c in msg.get("tool_calls") or []]
    return Reply(none_if_empty(text_of(msg.get("content"))), calls,
                 _tokens(completion.get("usage")))


def failure(data: dict[str, Any]) -> str | None:
    """What a ``chat.completion`` (or one of its stream chunks) says went wrong, if it says
    so: an ``error`` member beside or inside a choice, or ``finish_reason: error`` (proxies and
    routers answer an upstream failure that way, with status 200)."""
    raw = data.get("choices")
    choices = raw if isinstance(raw, list) else []
    for found in (data, *(c for c in choices if isinstance(c, dict))):
        error = found.get("error")
        if error:
            return error_text(error)
        if found.get("finish_reason") == "error":
            return "finish_reason: error"
    return None


def _tokens(usage: dict[str, Any] | None) -> Tokens:
    if not usage:
        return Tokens()
    details = usage.get("prompt_tokens_details") or {}
    return Tokens(input=int(usage.get("prompt_tokens") or 0),
                  cached=int(details.get("cached_tokens") or 0),
                  output=int(usage.get("completion_tokens") or 0))


@dataclass
class ChatAccumulator:
    """Builds a reply from ``chat.completion.chunk`` dicts; ``done`` once a choice finished."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    done: bool = False

    def add(self, chunk: dict[str, Any]) -> None:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.text.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(int(tc.get("index", 0)),
                                             {"id": "", "name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["id"] = tc.get("id") or slot["id"]
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.done = True

    def reply(self) -> Reply:
        calls = [ToolCall(id=c["id"], name=c["name"], arguments=parse_args(c["arguments"]))
                 for _, c in sorted(self.calls.items())]
        return Reply(none_if_empty("".join(self.text)), calls, _tokens(self.usage))


# ---------------------------------------------------------------- gateway side


def parse_request(body: dict[str, Any]) -> tuple[list[Message], list[ToolDef]]:
    """The conversation and tools of a Chat Completions request body."""
    messages: list[Message] = []
    for m in body.get("messages") or []:
        role = m.get("role", "user")
        role = "system" if role == "developer" else role
        if role == "tool":
            messages.append(Message(role="tool", tool_call_id=m.get("tool_call_id"),
                                    content=text_of(m.get("content"))))
        elif role in ("system", "user", "assistant"):
            calls = [ToolCall(id=c.get("id") or "", name=(c.get("function") or {}).get("name", ""),
                              arguments=parse_args((c.get("function") or {}).get("arguments")))
                     for c in m.get("tool_calls") or []]
            messages.append(Message(role=role, content=text_of(m.get("content")), tool_calls=calls))
    tools = [ToolDef(name=f["name"], description=f.get("description") or "",
                     parameters=f.get("parameters") or {"type": "object"})
             for t in body.get("tools") or [] if (f := t.get("function") or {}).get("name")]
    return messages, tools


def _usage(turn: ModelTurn) -> dict[str, Any]:
    u = turn.usage
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens}}


def _tool_calls(turn: ModelTurn) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": args_text(c.arguments)}}
            for c in turn.tool_calls]


def response_body(turn: ModelTurn, model: str, cid: str) -> dict[str, Any]:
    """The non-streaming answer."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = _tool_calls(turn)
    return {"id": cid, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": _usage(turn)}


def stream_events(turn: ModelTurn, model: str, cid: str,
                  include_usage: bool) -> list[tuple[str | None, dict[str, Any] | str]]:
    """The streaming answer: chunks, an optional usage chunk, then ``[DONE]``."""
    base = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if turn.text:
        chunks.append(chunk({"content": turn.text}))
    for i, call in enumerate(_tool_calls(turn)):
        fn = call["function"]
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": fn["name"], "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]}))
    chunks.append(chunk({}, "tool_calls" if turn.tool_calls else "stop"))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _usage(turn)})
    return [*((None, c) for c in chunks), (None, "[DONE]")]
