"""The Anthropic Messages API (``POST /v1/messages``) as limbo sees it, both directions.

Differences from the OpenAI formats that the conversion has to bridge: the system prompt is a
top-level field; tool results are ``tool_result`` blocks inside a *user* message, so
consecutive tool results (and a follow-up note after them) share one user message; tool input
is a JSON object, so unparsable argument text travels wrapped (see :mod:`limbo.providers.wire`).
Usage counts cache reads and cache writes apart from ``input_tokens``; limbo folds them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.episode.models import Message, ModelTurn, ToolCall, ToolDef
from limbo.providers.wire import (
    Reply,
    Tokens,
    args_object,
    args_text,
    error_text,
    from_object,
    is_error_result,
    merge_assistant,
    none_if_empty,
    parse_args,
    text_of,
)

DEFAULT_MAX_TOKENS = 4096

# ---------------------------------------------------------------- adapter side


def request(messages: list[Message], tools: list[ToolDef], model: str,
            options: dict[str, Any]) -> dict[str, Any]:
    """Body of ``messages.create`` for this conversation."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    body: dict[str, Any] = {"model": model,
                            "max_tokens": int(options.get("max_tokens", DEFAULT_MAX_TOKENS)),
                            "messages": _messages([m for m in messages if m.role != "system"])}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [{"name": t.name, "description": t.description,
                          "input_schema": t.parameters} for t in tools]
        if options.get("parallel_tool_calls") is False:
            body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
    for name in ("temperature", "top_p"):
        if name in options:
            body[name] = options[name]
    return body


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks = _blocks(m)
        role = "assistant" if m.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or "",
                                 "content": m.content}
        if is_error_result(m.content):
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    blocks.extend({"type": "tool_use", "id": c.id, "name": c.name,
                   "input": args_object(c.arguments)} for c in m.tool_calls)
    return blocks


def reply(message: dict[str, Any]) -> Reply:
    """Text, tool calls and tokens of a Messages ``message``."""
    texts, calls = [], []
    for block in message.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(id=block.get("id", ""), name=block.get("name", ""),
                                  arguments=from_object(block.get("input"))))
    return Reply(none_if_empty("".join(texts)), calls, _tokens(message.get("usage")))


def failure(message: dict[str, Any]) -> str | None:
    """What a Messages answer says went wrong, if it is an error object
    (``{"type": "error", "error": {...}}``) sent with status 200."""
    if message.get("type") == "error" or message.get("error"):
        return error_text(message.get("error") or "error")
    return None


def _tokens(usage: dict[str, Any] | None) -> Tokens:
    if not usage:
        return Tokens()
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return Tokens(input=int(usage.get("input_tokens") or 0) + read + write, cached=read,
                  cache_write=write, output=int(usage.get("output_tokens") or 0))


@dataclass
class MessagesAccumulator:
    """Builds a reply from raw stream event dicts, keeping tool input as the raw JSON text the
    model produced (so malformed input reaches the boundary instead of failing the parser)."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def add(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.usage.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self.blocks[int(event.get("index", 0))] = {**block, "json": "", "text": block.get("text", "")}
        elif kind == "content_block_delta":
            self._delta(self.blocks.get(int(event.get("index", 0))), event.get("delta") or {})
        elif kind == "message_delta":
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.done = True

    @staticmethod
    def _delta(block: dict[str, Any] | None, delta: dict[str, Any]) -> None:
        if block is None:
            return
        if delta.get("type") == "text_delta":
            block["text"] += delta.get("text", "")
        elif delta.get("type") == "input_json_delta":
            block["json"] += delta.get("partial_json", "")

    def reply(self) -> Reply:
        texts, calls = [], []
        for _, b in sorted(self.blocks.items()):
            if b.get("type") == "text":
                texts.append(b["text"])
            elif b.get("type") == "tool_use":
                args = from_object(parse_args(b["json"])) if b["json"] else from_object(b.get("input") or {})
                calls.append(ToolCall(id=b.get("id", ""), name=b.get("name", ""), arguments=args))
        return Reply(none_if_empty("".join(texts)), calls, _tokens(self.usage))


# ---------------------------------------------------------------- gateway side


def parse_request(body: dict[str, Any]) -> tuple[list[Message], list[ToolDef]]:
    """The conversation and tools of a Messages request body."""
    messages: list[Message] = []
    if body.get("system"):
        messages.append(Message(role="system", content=text_of(body["system"])))
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if m.get("role") == "assistant":
            _read_assistant(blocks, messages)
        else:
            _read_user(blocks, messages)
    tools = [ToolDef(name=t["name"], description=t.get("description") or "",
                     parameters=t.get("input_schema") or {"type": "object"})
             for t in body.get("tools") or [] if t.get("name") and "input_schema" in t]
    return messages, tools


def _read_assistant(blocks: list[dict[str, Any]], messages: list[Message]) -> None:
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = [ToolCall(id=b.get("id", ""), name=b.get("name", ""),
                      arguments=from_object(b.get("input")))
             for b in blocks if b.get("type") == "tool_use"]
    merge_assistant(messages, text, calls)


def _read_user(blocks: list[dict[str, Any]], messages: list[Message]) -> None:
    texts: list[str] = []
    for b in blocks:
        if b.get("type") == "tool_result":
            messages.append(Message(role="tool", tool_call_id=b.get("tool_use_id"),
                                    content=text_of(b.get("content"))))
        elif b.get("type") == "text":
            texts.append(b.get("text", ""))
    if texts:
        messages.append(Message(role="user", content="\n".join(texts)))


def _content(turn: ModelTurn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    blocks.extend({"type": "tool_use", "id": c.id, "name": c.name,
                   "input": args_object(c.arguments)} for c in turn.tool_calls)
    return blocks


def _usage(turn: ModelTurn) -> dict[str, Any]:
    u = turn.usage
    return {"input_tokens": u.input_tokens - u.cached_input_tokens,
            "output_tokens": u.output_tokens, "cache_read_input_tokens": u.cached_input_tokens,
            "cache_creation_input_tokens": 0}


def response_body(turn: ModelTurn, model: str, mid: str) -> dict[str, Any]:
    """The non-streaming answer."""
    return {"id": mid, "type": "message", "role": "assistant", "model": model,
            "content": _content(turn), "stop_sequence": None,
            "stop_reason": "tool_use" if turn.tool_calls else "end_turn", "usage": _usage(turn)}


def stream_events(turn: ModelTurn, model: str, mid: str) -> list[tuple[str | None, dict[str, Any]]]:
    """The streaming answer: named events from ``message_start`` to ``message_stop``."""
    usage = _usage(turn)
    start = {**response_body(turn, model, mid), "content": [], "stop_reason": None,
             "usage": {**usage, "output_tokens": 0}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    index = 0
    if turn.text:
        events.extend(_block_events(index, {"type": "text", "text": ""},
                                    {"type": "text_delta", "text": turn.text}))
        index += 1
    for call in turn.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": args_text(call.arguments)}
        events.extend(_block_events(index, block, delta))
        index += 1
    events.append({"type": "message_delta",
                   "delta": {"stop_reason": "tool_use" if turn.tool_calls else "end_turn",
                             "stop_sequence": None},
                   "usage": {"output_tokens": usage["output_tokens"]}})
    events.append({"type": "message_stop"})
    return [(e["type"], e) for e in events]


def _block_events(i: int, block: dict[str, Any], delta: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "content_block_start", "index": i, "content_block": block},
            {"type": "content_block_delta", "index": i, "delta": delta},
            {"type": "content_block_stop", "index": i}]
