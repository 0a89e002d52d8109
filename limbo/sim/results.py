"""The two shapes of a tool result the agent sees.

A result is a JSON object: ``{"ok": true, ...payload}`` or ``{"ok": false, "error": {...}}``
whose ``kind`` comes from the closed set :data:`ERROR_KINDS`. Whether a fault produced an error
is never part of the result; it is recorded in the event log only.
"""

from __future__ import annotations

import copy
from typing import Any, Literal, get_args

ErrorKind = Literal[
    "timeout",
    "server_error",
    "connection_reset",
    "rate_limited",
    "conflict",
    "not_found",
    "invalid_argument",
    "idempotency_mismatch",
    "not_available",
]
ERROR_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))

#: Failures after which the write may or may not have taken effect.
AMBIGUOUS_KINDS: frozenset[str] = frozenset({"timeout", "server_error", "connection_reset"})

_DEFAULT_STATUS: dict[str, int | None] = {
    "timeout": None,
    "server_error": 500,
    "connection_reset": None,
    "rate_limited": 429,
    "conflict": 409,
    "not_found": 404,
    "invalid_argument": 400,
    "idempotency_mismatch": 422,
    "not_available": 501,
}

Result = dict[str, Any]


def ok(**payload: Any) -> Result:
    """A success result carrying ``payload``."""
    return {"ok": True, **payload}


def error(
    kind: ErrorKind,
    message: str,
    *,
    status: int | None | Literal["default"] = "default",
    retry_after_s: float | None = None,
    **extra: Any,
) -> Result:
    """A failure result of the closed ``kind``; ``status`` defaults to the kind's HTTP code."""
    if kind not in ERROR_KINDS:
        raise ValueError(f"unknown error kind {kind!r}; choose from {sorted(ERROR_KINDS)}")
    body: dict[str, Any] = {
        "status": _DEFAULT_STATUS[kind] if status == "default" else status,
        "kind": kind,
        "message": message,
    }
    if retry_after_s is not None:
        body["retry_after_s"] = retry_after_s
    body.update(extra)
    return {"ok": False, "error": body}


def error_kind(result: Result) -> str | None:
    """The error kind of ``result``, or ``None`` for a success."""
    if result.get("ok"):
        return None
    return str(result["error"]["kind"])


def is_ambiguous(result: Result) -> bool:
    """True when a write that returned ``result`` may still have taken effect."""
    return error_kind(result) in AMBIGUOUS_KINDS


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copied(value: Any) -> Any:
    """A deep copy of a JSON-like value, equal to ``copy.deepcopy(value)``. Results are trees
    of dicts, lists and scalars, copied on every delivery: copying exactly those inline costs
    a fraction of ``deepcopy``'s general machinery. Anything else (a tuple, a dict subclass, an
    object) is handed to ``deepcopy``. Unlike ``deepcopy``, a container that appears twice is
    copied twice: the copy holds the same values, not the same aliasing."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else copied(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copied(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)
