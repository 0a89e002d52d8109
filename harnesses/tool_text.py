"""Reading a tool result back from the text a harness shows the model.

The minimal loop hands the model the result's JSON as is. A production harness wraps it: Codex
puts a wall-time line before it, Hermes puts it in a ``{"result": …}`` or ``{"error": …}``
object inside an ``<untrusted_tool_result>`` envelope, Copilot prefixes errors with the server's
name; and when the harness gave up on a call itself (its tool timeout), the model sees only
the harness's own sentence. A reference policy behind the gateway reads all of them: the
sandbox's JSON wherever it is embedded, else a harness's timeout sentence (each driver names
its own, :attr:`timeout_texts`), else an error it cannot interpret.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from limbo.sim.results import Result

ENVELOPE = re.compile(r"<untrusted_tool_result[^>]*>(.*)</untrusted_tool_result>", re.S)
MAX_SCAN = 200_000
_BRACE = re.compile(r"{")
_DECODER = json.JSONDecoder()
"""One decoder for every result read: it keeps no state between calls, and a reference policy
reads a result on every turn of every episode."""


def read_result(content: str) -> Result:
    """The sandbox result carried by ``content``, however a harness wrapped it."""
    found = _embedded(content, depth=0)
    if found is not None:
        return found
    text = content.strip()
    if any(p.search(text) for p in timeout_patterns()):
        return {"ok": False, "error": {"kind": "timeout", "message": text[:500]}}
    return {"ok": False, "error": {"kind": "not_available", "message": text[:500]}}


def _embedded(text: str, depth: int) -> Result | None:
    """The first JSON object with an ``ok`` field in ``text``, looking inside envelopes and
    inside JSON strings that hold JSON (two levels deep at most)."""
    if depth > 2:
        return None
    inner = ENVELOPE.search(text)
    if inner:
        text = inner.group(1)
    for match in _BRACE.finditer(text[:MAX_SCAN]):
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        found = _from_value(value, depth)
        if found is not None:
            return found
    return None


def _from_value(value: Any, depth: int) -> Result | None:
    if isinstance(value, dict):
        if isinstance(value.get("ok"), bool):
            return value
        for key in ("result", "error", "content", "text", "output"):
            inner = value.get(key)
            if isinstance(inner, str):
                return _embedded(inner, depth + 1)
            if isinstance(inner, (dict, list)):
                found = _from_value(inner, depth + 1)
                if found is not None:
                    return found
    if isinstance(value, list):
        for item in value:
            found = _from_value(item, depth + 1)
            if found is not None:
                return found
    return None


@cache
def timeout_patterns() -> tuple[re.Pattern[str], ...]:
    """Every registered harness's timeout sentences."""
    from limbo.base.registry import entries

    texts = [t for cls in entries("harness").values() for t in getattr(cls, "timeout_texts", ())]
    return tuple(re.compile(t, re.I) for t in texts)
