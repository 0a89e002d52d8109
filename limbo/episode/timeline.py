"""The two-column timeline of an episode: what the agent saw, and what really happened.

The left column is the agent's view (its calls and the results it got); the right column is the
hidden side from the same event log (fault injections, commits, in-flight arrivals, replays,
reads that lag behind commits, scaffold and guard actions, clock jumps).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from limbo.log.records import EpisodeRecord
from limbo.sim.events import VISIBLE_TYPES

WIDTH = 90


def _short(value: Any, width: int = WIDTH) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(event: dict[str, Any]) -> str:
    """One line for one event."""
    kind = event["type"]
    if kind == "turn":
        return f"model turn {event['n']}" + (f": {_short(event['text'], 60)}" if event.get("text") else "")
    if kind == "call":
        return f"→ {event['tool']}({_short(event['args'])})"
    if kind == "result":
        return f"← {_short(event['result'])}"
    if kind == "finish":
        return f"finish {_short(event['report'])}"
    if kind == "fault":
        return f"FAULT {event['mode']} on {event['request_id']} {_short(event.get('detail') or {})}"
    if kind == "commit":
        return f"COMMIT #{event['seq']} {event['tool']} [{event['attempt']}] → {event['object_id']}"
    if kind == "arrival":
        return f"ARRIVAL {event.get('request_id')} [{event.get('attempt')}] {event.get('outcome', '')}"
    if kind == "replay":
        return f"REPLAY {event['request_id']} key={event['key']} (no effect)"
    if kind == "lagged_read":
        hides = ", ".join(f"#{seq}" for seq in event["hidden"])
        return f"LAGGED READ {event['tool']} sees up to t={event['horizon']:.1f} (hides {hides})"
    if kind == "clock":
        return f"clock +{event['seconds']:g}s ({event['reason']})"
    rest = {k: v for k, v in event.items() if k not in ("t", "type")}
    return f"{kind.upper()} {_short(rest)}"


def render(record: EpisodeRecord, console: Any) -> None:
    """Print a record's timeline and outcome."""
    from rich.markup import escape
    from rich.table import Table

    cell = record["cell"]
    title = (f"{record['episode_id']}  {cell['model']} · {cell['condition']} · {cell['contract']}"
             f" · fault {cell['fault']} on {cell['focal_write']} · {cell['template']}#{cell['instance']}")
    table = Table(title=escape(title), show_lines=False)
    table.add_column("t (s)", justify="right")
    table.add_column("what the agent saw", overflow="fold")
    table.add_column("what really happened", overflow="fold")
    for event in record["events"]:
        text = escape(describe(event))
        visible = event["type"] in VISIBLE_TYPES
        table.add_row(f"{event['t']:.1f}", text if visible else "", "" if visible else text)
    console.print(table)
    out: Mapping[str, Any] = record["outcome"]
    keys = ("fault_fired", "commits", "duplicate", "task_success", "exactly_once", "report_status",
            "overclaim", "termination", "agent_time_s")
    console.print(escape("outcome: " + ", ".join(f"{k}={out[k]}" for k in keys)))
