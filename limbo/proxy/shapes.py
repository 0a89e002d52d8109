"""Reading the upstream's answers: an MCP tool result as the JSON the ledger and the event log
hold, the id a write's answer carries, the items a read's answer lists.

An MCP tool result (its JSON: ``content`` blocks, usually one JSON text, optionally
``structuredContent``, and ``isError``). The proxy reads, in this order: the structured content, else the first text
block that parses as a JSON object (or list), else the text itself. A read's *items* are the
answer itself when it is a list, else the first list of objects among its fields (``{"orders":
[...]}``), looking one level down (``{"data": {"orders": [...]}}``). That covers the shapes MCP
servers answer with; a read whose answer has no list shows no items (and cannot reconcile).
"""

from __future__ import annotations

import json
from typing import Any

from limbo.proxy.wire import loads

Payload = dict[str, Any]


def payload(result: dict[str, Any]) -> Payload:
    """An MCP tool result as one JSON object: ``{"ok": ..., **answer}`` for an object answer,
    ``{"ok": ..., "items": [...]}`` for a list, ``{"ok": ..., "text": ...}`` else. ``ok`` is
    the upstream's ``not isError`` unless the answer says ``ok`` itself."""
    ok = not result.get("isError")
    body = raw(result)
    if isinstance(body, dict):
        return {"ok": ok, **body} if "ok" not in body else dict(body)
    if isinstance(body, list):
        return {"ok": ok, "items": body}
    return {"ok": ok, "text": body}


def raw(result: dict[str, Any]) -> Any:
    """What an MCP tool result says: its structured content, else its JSON text (an object or
    a list), else its text."""
    structured = result.get("structuredContent")
    return structured if isinstance(structured, dict) else _parsed(result)


def result_of(body: Any, error: bool = False, structured: bool = False) -> dict[str, Any]:
    """An MCP tool result carrying ``body`` as JSON text (and as structured content)."""
    out: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(
        body, ensure_ascii=False)}], "isError": error}
    if structured and isinstance(body, dict):
        out["structuredContent"] = body
    return out


def _parsed(result: dict[str, Any]) -> Any:
    content = result.get("content")
    texts = [t for c in (content if isinstance(content, list) else ())
             if isinstance(c, dict) and isinstance(t := c.get("text"), str)]
    for text in texts:
        if text.lstrip()[:1] in ("{", "["):
            try:
                value = loads(text)
            except ValueError:
                continue
            if isinstance(value, (dict, list)):
                return value
    return "\n".join(texts)


def items(answer: Payload) -> list[dict[str, Any]]:
    """The items a read's answer lists (see the module's doc)."""
    found = _first_list(answer)
    if found is None:
        for value in answer.values():
            if isinstance(value, dict) and (found := _first_list(value)) is not None:
                break
    return [i for i in found or () if isinstance(i, dict)]


def _first_list(node: dict[str, Any]) -> list[Any] | None:
    for value in node.values():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
    for value in node.values():
        if isinstance(value, list) and not value:
            return value
    return None


def object_id(answer: Payload, field: str | None) -> str | None:
    """The id a write's answer carries in ``field`` (at the top, or one object down:
    ``{"order": {"order_id": ...}}``); ``None`` when it carries none."""
    if field is None:
        return None
    value = answer.get(field)
    if value is None:
        for inner in answer.values():
            if isinstance(inner, dict) and inner.get(field) is not None:
                value = inner[field]
                break
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def readable(answer: Payload) -> dict[str, Any]:
    """``answer`` in the sandbox's result shape for :class:`~limbo.sim.readback.ReadPlan`:
    ``{"ok": ..., "items": [...]}``."""
    return {"ok": bool(answer.get("ok")), "items": items(answer)}
