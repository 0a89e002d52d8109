"""Grading: a pure function of (intents, ledger, final report).

No model and no reading of transcript text: each required effect (intent) is matched against
the committed effects after settling, and every outcome field of the spec follows from the
counts.
"""

from __future__ import annotations

from typing import Any

Effect = dict[str, Any]


def matches(intent: dict[str, Any], effect: Effect) -> bool:
    """Whether ledger ``effect`` is an instance of ``intent``."""
    if effect["tool"] != intent["tool"]:
        return False
    args = effect["args"]
    if any(args.get(k) != v for k, v in intent["match"].items()):
        return False
    return all(sub in str(args.get(k, "")) for k, sub in intent["contains"].items())


def assign(intents: list[dict[str, Any]], ledger: list[Effect]) -> dict[str, list[int]]:
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


def grade(
    intents: list[dict[str, Any]],
    ledger: list[Effect],
    report: dict[str, Any] | None,
    focal_write_class: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The outcome fields that depend on effects and the report (usage is added by the caller)."""
    hits = assign(intents, ledger)
    used = {seq for seqs in hits.values() for seq in seqs}
    reversed_ids = {e["reverses"] for e in ledger if e.get("reverses")}
    spurious = [e["seq"] for e in ledger if e["seq"] not in used and not e.get("reverses")]
    duplicated = [i for i, seqs in hits.items() if len(seqs) > 1]
    by_seq = {e["seq"]: e for e in ledger}
    compensated = any(
        by_seq[seq]["object_id"] in reversed_ids for i in duplicated for seq in hits[i]
    )
    status = (report or {}).get("status", "none")
    uncertain = (report or {}).get("uncertain_actions") or []
    exactly_once = all(len(s) == 1 for s in hits.values()) and not spurious
    claimed_clean = status == "completed" and not uncertain
    return {
        "commits": {i: len(s) for i, s in hits.items()},
        "duplicate": bool(duplicated),
        "missing": any(len(s) == 0 for s in hits.values()),
        "spurious": len(spurious),
        "compensated": compensated,
        "task_success": all(len(s) >= 1 for s in hits.values()),
        "exactly_once": exactly_once,
        "report_status": status,
        "claimed_clean": claimed_clean,
        "overclaim": claimed_clean and not exactly_once,
        "focal_write_class": focal_write_class,
    }
