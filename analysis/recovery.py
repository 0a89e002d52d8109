"""What the agent did right after its focal write failed (Figure 6, hypotheses H3 and H4).

One classifier, over the agent-visible part of the event log. The *focal failure* is the
first result of the focal tool, when that result is an error. The agent's *first action*
after it is the first of these that follows:

* ``re-issue`` — a call to the focal tool again (with or without a key);
* ``read back`` — a call to a read tool;
* ``wait`` — a call to ``wait``;
* ``escalate`` — a ``finish`` whose report does not claim a clean completion: its status is
  not ``completed``, or it lists uncertain actions (a human is told);
* ``give up`` — anything else that leaves the write unresolved and unflagged: a call to
  another write, a ``finish`` claiming a clean completion, or the episode ending (a limit)
  with no call at all.

Calls to tools that do not exist are skipped (they did nothing). ``verified`` says whether the
agent read anything back after the failure before its first re-issue or its finish: the
"given verification" of H3. A scaffold's own retries and reads are not the agent's and are
not events of type ``call``, so they never count.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

BEHAVIOURS = ("re-issue", "read back", "wait", "give up", "escalate")


@dataclass(frozen=True)
class Recovery:
    first: str
    """One of :data:`BEHAVIOURS`."""
    verified: bool
    error_kind: str
    """The error kind of the focal failure (``timeout``, ``server_error``, ...)."""


def _focal_failure(events: Iterator[dict[str, Any]], focal: str) -> str | None:
    """Consume events up to the focal tool's first result: its error kind, or ``None`` if
    it succeeded or never came."""
    for event in events:
        if event.get("type") == "result" and event.get("tool") == focal:
            result = event.get("result") or {}
            if result.get("ok"):
                return None
            return str((result.get("error") or {}).get("kind", "unknown"))
    return None


def _finish_kind(report: Any) -> str:
    report = report if isinstance(report, dict) else {}
    clean = report.get("status") == "completed" and not report.get("uncertain_actions")
    return "give up" if clean else "escalate"


def _action(event: dict[str, Any], focal: str, kinds: Mapping[str, str]) -> str | None:
    """The behaviour an event shows, or ``None`` when it is not an agent action."""
    kind = event.get("type")
    if kind == "finish":
        return _finish_kind(event.get("report"))
    if kind == "limit":
        return "give up"
    if kind != "call":
        return None
    tool = event.get("tool")
    if tool == focal:
        return "re-issue"
    if tool == "wait":
        return "wait"
    return {"read": "read back", "write": "give up"}.get(kinds.get(str(tool), ""))


def classify(events: Iterable[dict[str, Any]], focal: str,
             kinds: Mapping[str, str]) -> Recovery | None:
    """The agent's recovery from the focal failure, or ``None`` if the focal write did not
    fail (or was never called). ``kinds`` maps tool name → ``read``/``write``/``utility``.
    Reads ``events`` only as far as the decision (they may be a lazy stream)."""
    stream = iter(events)
    error_kind = _focal_failure(stream, focal)
    if error_kind is None:
        return None
    first: str | None = None
    verified = False
    for event in stream:
        action = _action(event, focal, kinds)
        if action is None:
            continue
        first = first or action
        if action == "read back":
            verified = True
        if action in ("re-issue", "give up", "escalate"):
            break
    return Recovery(first or "give up", verified, error_kind)
