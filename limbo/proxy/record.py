"""A proxied episode's record: built from its journal alone, graded like a sandbox episode, and
appended to the run directory where ``limbo status``, ``tables``, ``report`` and ``compare``
read it.

The record is a ``limbo.episode/1`` record. Its ``t`` are wall seconds since the episode
started (the proxy's clock); its ledger holds the committed writes and the writes that
reconciliation recovered; its events are the agent's calls and results, the fault, the late
arrivals and a ``commit`` per ledger effect; its outcome is :func:`limbo.log.grading.grade`'s on the
task's intents. It is not reproducible the way a sandbox record is — the upstream and the wall
clock are real — so the ``runtime`` field carries what the proxy saw: the upstream, the time
scale, the writes by state, the duplicates by business key, the reconciliation and the items
no write accounts for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from limbo import __version__
from limbo.base.runtime import host_facts
from limbo.log.grading import grade
from limbo.log.reader import validate
from limbo.log.records import SCHEMA, EpisodeRecord, Header, LedgerEntry, Outcome, Runtime
from limbo.proxy.declared import Catalog
from limbo.proxy.ledger import Ledger
from limbo.sim.config import Limits, dumped
from limbo.sim.events import EVENT_TYPES, VISIBLE_TYPES, Termination

LEDGER_TYPES = ("intent", "ack", "lost", "reconciled")
NO_TASK: dict[str, Any] = {"prompt": None, "intents": [], "plan_hash": None, "focal_write_class": None}
"""The task of an episode whose proxy stopped before its setup ended."""


def first(entries: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    for entry in entries:
        if entry["type"] == kind:
            return entry
    raise KeyError(kind)


def ledger_of(entries: list[dict[str, Any]], catalog: Catalog) -> Ledger:
    ledger = Ledger(catalog)
    for entry in entries:
        if entry["type"] in LEDGER_TYPES:
            ledger.apply(entry)
    return ledger


def build(entries: list[dict[str, Any]], catalog: Catalog, wall_s: float,
          termination: tuple[str, str | None] = ("finished", None),
          extra: dict[str, Any] | None = None) -> EpisodeRecord:
    """The record of the journal ``entries`` (reconciliation already in them)."""
    start = first(entries, "start")
    task = next((e for e in entries if e["type"] == "task"), NO_TASK)
    ledger = ledger_of(entries, catalog)
    effects = ledger.entries()
    events = [e for e in entries if e["type"] in EVENT_TYPES]
    events += [{"t": e["t"], "type": "commit", "seq": e["seq"], "tool": e["tool"],
                "request_id": e["request_id"], "attempt": e["attempt"],
                "object_id": e["object_id"]} for e in effects]
    if termination[0] != "finished":
        events.append({"t": max((e["t"] for e in events), default=0.0), "type": "limit",
                       "reason": termination[0]})
    events.sort(key=lambda e: e["t"])
    finished = [e for e in events if e["type"] == "finish"]
    report = finished[-1]["report"] if finished else None
    record = EpisodeRecord(
        schema=SCHEMA, episode_id=start["episode_id"], cell=start["cell"],
        header=Header(timing=start["timing"], limits=dumped(Limits()), prompts={},
                      task_prompt=task["prompt"], intents=task["intents"],
                      version=__version__, plan_hash=task["plan_hash"]),
        outcome=_outcome(events, task, effects, report, termination),
        report=report, events=events, ledger=cast(list[LedgerEntry], effects), usage=[],
        runtime=cast(Runtime, {"wall_s": round(wall_s, 6), **host_facts(),
                               "proxy": {**start["proxy"], **_summary(ledger),
                                         **(extra or {})}}),
    )
    return validate(record, f"proxy episode {start['episode_id']}")  # a bug, never a bad line


def _outcome(events: list[dict[str, Any]], task: dict[str, Any], effects: list[dict[str, Any]],
             report: dict[str, Any] | None, termination: tuple[str, str | None]
             ) -> Outcome:
    seen = [e["t"] for e in events if e["type"] in VISIBLE_TYPES]
    return Outcome(
        fault_fired=any(e["type"] == "fault" for e in events),
        **grade(task["intents"], effects, report, task["focal_write_class"]),
        agent_time_s=max(seen, default=0.0),
        tool_calls=sum(e["type"] == "call" for e in events),
        model_turns=0, input_tokens=0, output_tokens=0, cost_usd=0.0,
        termination=cast(Termination, termination[0]), termination_reason=termination[1],
    )


def _summary(ledger: Ledger) -> dict[str, Any]:
    return {"writes": ledger.counts(), "duplicates": ledger.duplicates(),
            "misdeclared": ledger.contradicted(),
            "reconciled": [{"request_id": w.request_id, "tool": w.tool, "state": w.state,
                            "why": w.why} for w in ledger.writes.values()
                           if w.state not in ("committed", "replayed")]}


def append(run_dir: Path, record: EpisodeRecord, scrub: Any) -> None:
    """Append ``record`` to the run's records file (one write, synced)."""
    from limbo.log.store import RecordWriter, encode, episodes_file

    writer = RecordWriter(episodes_file(run_dir, None))
    try:
        writer.write(encode(record, scrub))
    finally:
        writer.close()
