"""Grading: a pure function of (intents, ledger, final report).

No model and no reading of transcript text: each required effect (intent) is matched against
the committed effects after settling, and every outcome field of the spec follows from the
counts. An effect counts toward its intent being done only while it is *in force*: a later
compensating action (delete, refund, status revert or close) undoes it. How often an intent
committed (``commits``, ``duplicate``) counts every matching effect, undone or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from limbo.log.reader import validate
from limbo.log.records import Graded, Intent, ReportPart, WriteClass

Effect = Mapping[str, Any]
"""A ledger entry (:class:`limbo.log.records.LedgerEntry`; the world builds them as dicts)."""

GRADER_VERSION = "2"
"""The version of these rules, written into every run's manifest: change it with any change
that can grade one ledger differently (version 2: an undone effect no longer counts toward an
intent being done). ``limbo tables --regrade`` names the version a run was graded with and
this one, and lists the episodes whose grade changed."""


def matches(intent: Intent, effect: Effect) -> bool:
    """Whether ledger ``effect`` is an instance of ``intent``."""
    if effect["tool"] != intent["tool"]:
        return False
    args = effect["args"]
    for k, v in intent["match"].items():  # loops, not any()/all(): a report matches 250,000
        if args.get(k) != v:
            return False
    for k, sub in intent["contains"].items():
        if sub not in str(args.get(k, "")):
            return False
    return True


def assign(intents: list[Intent], ledger: Sequence[Effect]) -> dict[str, list[int]]:
    """For each intent, the ledger sequence numbers of the effects that match it.

    An effect counts toward the first intent it matches (intents are specific enough that an
    effect matching two would be a template bug).
    """
    hits: dict[str, list[int]] = {intent["id"]: [] for intent in intents}
    for effect in ledger:
        for intent in intents:
            if matches(intent, effect):
                hits[intent["id"]].append(effect["seq"])
                break
    return hits


def undone(ledger: Sequence[Effect]) -> set[int]:
    """Sequence numbers of the effects that a later compensating action undid.

    Each compensating effect (one that ``reverses`` an object) undoes the most recent effect
    on that object that is still in force — a refund its charge, a delete its post, a status
    revert the status change before it, a close the ticket's latest change (its creation, if
    nothing else happened to it). An undone effect stays undone.
    """
    latest: dict[str, list[int]] = {}
    out: set[int] = set()
    for effect in ledger:
        target = effect.get("reverses")
        if target and latest.get(target):
            out.add(latest[target].pop())
        if effect.get("object_id") is not None:
            latest.setdefault(effect["object_id"], []).append(effect["seq"])
    return out


def grade(
    intents: list[Intent],
    ledger: Sequence[Effect],
    report: ReportPart | None,
    focal_write_class: WriteClass | None = None,
) -> Graded:
    """The outcome fields that depend on effects and the report (usage is added by the caller)."""
    hits = assign(intents, ledger)
    used = {seq for seqs in hits.values() for seq in seqs}
    spurious = [e["seq"] for e in ledger if e["seq"] not in used and not e.get("reverses")]
    gone = undone(ledger)
    in_force = {i: [seq for seq in seqs if seq not in gone] for i, seqs in hits.items()}
    duplicated = [i for i, seqs in hits.items() if len(seqs) > 1]
    compensated = any(seq in gone for i in duplicated for seq in hits[i])
    status = (report or {}).get("status", "none")
    uncertain = (report or {}).get("uncertain_actions") or []
    exactly_once = (all(len(hits[i]) == 1 and len(in_force[i]) == 1 for i in hits)
                    and not spurious)
    claimed_clean = status == "completed" and not uncertain
    return Graded(
        commits={i: len(s) for i, s in hits.items()},
        duplicate=bool(duplicated),
        missing=any(not s for s in in_force.values()),
        spurious=len(spurious),
        compensated=compensated,
        task_success=all(in_force.values()),
        exactly_once=exactly_once,
        report_status=status,
        claimed_clean=claimed_clean,
        overclaim=claimed_clean and not exactly_once,
        focal_write_class=focal_write_class,
    )


def regrade(record: Any) -> Graded:
    """The graded fields of a stored record, recomputed from its log alone (the record is
    checked against its whole shape first, :func:`limbo.log.reader.validate`: a record that
    is not one is refused)."""
    rec = validate(record)
    return grade(rec["header"]["intents"], rec["ledger"], rec["report"],
                 rec["outcome"]["focal_write_class"])
