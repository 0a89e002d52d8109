"""Small facts shared by the three wire formats (OpenAI Responses, Chat Completions, Anthropic
Messages), in both directions: adapters build requests and read responses; the gateway reads
requests and builds responses. Keeping both directions next to each other is what makes a
round trip (adapter -> gateway -> adapter) lossless, and the tests check that it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from limbo.episode.models import Message, ToolCall
from limbo.log.records import Usage

UNPARSED = "_unparsed_arguments"
"""Anthropic needs tool input to be an object; text that was not JSON travels under this key."""


@dataclass(frozen=True)
class Tokens:
    """Token counts of one call, normalised: ``input`` includes cached and cache-write tokens."""

    input: int = 0
    cached: int = 0
    cache_write: int = 0
    output: int = 0

    def usage(self, cost: float | None) -> Usage:
        return Usage(input_tokens=self.input, output_tokens=self.output,
                     cached_input_tokens=self.cached, cost_usd=cost)

    @classmethod
    def of(cls, usage: Usage) -> Tokens:
        return cls(input=usage.input_tokens, cached=usage.cached_input_tokens,
                   output=usage.output_tokens)


@dataclass(frozen=True)
class Reply:
    """What one provider call produced, before pricing."""

    text: str | None
    tool_calls: list[ToolCall]
    tokens: Tokens


def args_text(arguments: dict[str, Any] | str) -> str:
    """Tool arguments as the JSON text a provider carries (raw text passes through)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def parse_args(text: str | None) -> dict[str, Any] | str:
    """Arguments from provider text: a dict when it is a JSON object, else the raw text, so the
    boundary can answer ``invalid_argument`` and the episode goes on."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


def args_object(arguments: dict[str, Any] | str) -> dict[str, Any]:
    """Arguments as a JSON object (Anthropic's ``input``); raw text is wrapped, not lost."""
    return arguments if isinstance(arguments, dict) else {UNPARSED: arguments}


def from_object(value: Any) -> dict[str, Any] | str:
    """Inverse of :func:`args_object` (also accepts raw text from a non-conforming server)."""
    if isinstance(value, dict):
        text = value.get(UNPARSED)
        if set(value) == {UNPARSED} and isinstance(text, str):
            return text
        return value
    if isinstance(value, str):
        return parse_args(value)
    return json.dumps(value)


def text_of(content: Any) -> str:
    """Plain text of a content field: a string, or a list of text-bearing parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(p.get("text", p.get("content")) if isinstance(p, dict) else p)
                         for p in content if not isinstance(p, dict) or _is_text(p))
    return str(content)


def _is_text(part: dict[str, Any]) -> bool:
    return part.get("type", "text") in ("text", "input_text", "output_text", "tool_result") or (
        "text" in part)


def error_text(error: Any) -> str:
    """A reported error, in one line: its code or type and its message when it has them."""
    if isinstance(error, dict):
        parts = [str(error[k]) for k in ("code", "type", "message") if error.get(k)]
        return ": ".join(parts) or json.dumps(error)[:200]
    return str(error)


def none_if_empty(text: str | None) -> str | None:
    return text if text else None


def merge_assistant(messages: list[Message], text: str, calls: list[ToolCall]) -> None:
    """Append assistant output, folding tool calls into a directly preceding assistant message
    (wire formats split one turn into several items)."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "assistant" and not text and calls:
        last.tool_calls = [*last.tool_calls, *calls]
        return
    messages.append(Message(role="assistant", content=text, tool_calls=calls))


def is_error_result(content: str) -> bool:
    """Whether a tool message carries an error result (``{"ok": false, ...}``)."""
    try:
        value = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return False
    return isinstance(value, dict) and value.get("ok") is False
