"""``--regrade``: grade every loaded episode again with this LIMBO's grader, explicitly.

Without it the analysis uses each record's outcome as graded when the episode ran: a log is the
source of truth, and a newer LIMBO never silently re-interprets an older one. With it, each
record's graded fields are recomputed from its intents, ledger and report
(:func:`limbo.log.grading.regrade`), the grader version the runs were graded with is named beside
this one, and every episode whose grade changed is listed with the fields that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.analysis.derive import derive
from limbo.analysis.loader import Loaded
from limbo.log.grading import GRADER_VERSION
from limbo.log.reader import RecordError
from limbo.log.records import FLAGS, NUMBERS

SHOWN = 20
"""Changed episodes listed on the terminal (all are counted)."""


@dataclass
class Regraded:
    """What re-grading changed."""

    was: list[str]
    """The grader versions the loaded runs recorded (``unknown`` for a run without a design)."""
    now: str = GRADER_VERSION
    changed: list[tuple[str, dict[str, tuple[Any, Any]]]] = field(default_factory=list)
    """(episode id, field → (recorded, regraded)) for each episode whose grade changed."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(episode id, why) for each record that could not be re-graded (kept as recorded)."""

    def lines(self) -> list[str]:
        """The report ``limbo tables --regrade`` prints."""
        out = [f"regraded with grader {self.now} (the runs were graded with "
               f"{', '.join(self.was)}): {len(self.changed)} episode(s) changed grade"]
        for episode_id, diff in self.changed[:SHOWN]:
            fields = "; ".join(f"{k} {a!r} → {b!r}" for k, a, b in
                               ((k, *v) for k, v in sorted(diff.items())))
            out.append(f"  {episode_id}: {fields}")
        if len(self.changed) > SHOWN:
            out.append(f"  … and {len(self.changed) - SHOWN} more")
        out += [f"  not regraded (kept as recorded): {i}: {why}" for i, why in self.refused]
        return out


def regrade(loaded: Loaded) -> Regraded:
    """Re-grade every episode of ``loaded`` in place (its frame's outcome columns and the
    columns derived from them) and say what changed."""
    from limbo.log.grading import regrade as grade_again

    was = sorted({str(r.design.get("grader", "unknown")) if r.recorded else "unknown"
                  for r in loaded.runs})
    result = Regraded(was)
    frame = loaded.frame
    columns = set(FLAGS) | set(NUMBERS) | {"report_status"}
    for index, record in loaded.records(frame):
        try:
            fresh = grade_again(record)
        except RecordError as exc:
            result.refused.append((str(record.get("episode_id")), str(exc)[:160]))
            continue
        diff = {k: (record["outcome"].get(k), v) for k, v in fresh.items()
                if record["outcome"].get(k) != v}
        if not diff:
            continue
        result.changed.append((str(record["episode_id"]), diff))
        for name, (_, value) in diff.items():
            if name in columns:
                if name == "report_status":
                    frame[name] = frame[name].cat.add_categories(
                        [value] if value not in frame[name].cat.categories else [])
                frame.at[index, name] = value
    result.changed.sort()
    if result.changed:
        derive(frame)
    return result
