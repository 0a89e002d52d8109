"""Episodes that ended because something outside the agent failed, and why, grouped.

``infra_error`` (the sandbox, an adapter or a harness broke) and ``model_error`` (the provider
failed after its retries) are errors: the cell says nothing about the agent, and the run is
not finished until it is run again (``limbo run ... --retry-errors``). ``timeout`` (the episode
ran past ``--episode-timeout`` of wall clock) is shown beside them but retried only when asked
(``--retry-errors=timeout``): a slow model may time out again, and the user decides.

The end of ``limbo run`` and ``limbo status`` print the errors grouped by reason — the first
line of the recorded ``termination_reason`` — with a count and the models affected, so that a
grid of 19 identical provider failures reads as one line, not 19.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from limbo.log.rated import ERRORED

TIMEOUT = "timeout"
ERROR_TERMINATIONS = tuple(t for t in ERRORED if t != TIMEOUT)
"""The errored terminations (:mod:`limbo.log.rated`) that fail a run: the cell must run again
before the run is complete. A timeout is errored too, but retried only when asked."""
RETRY_CHOICES = ("errors", "timeout")
"""What ``--retry-errors`` retries: ``errors`` (``ERROR_TERMINATIONS``), or ``timeout`` too."""
REASON_CHARS = 200
SHOWN = 10
"""Groups printed; the rest are counted in one line."""


def retried(which: str | None) -> tuple[str, ...]:
    """The terminations ``--retry-errors[=which]`` runs again (none without the flag)."""
    if which is None:
        return ()
    return (*ERROR_TERMINATIONS, TIMEOUT) if which == "timeout" else ERROR_TERMINATIONS


def first_line(reason: object) -> str:
    """What groups a reason: its first line, cut at :data:`REASON_CHARS`, with any credential
    masked (a reason held in memory has not been through the records' scrubbing yet)."""
    from limbo.base.secrets import scrub  # lazily: the providers package imports the store

    text = scrub(str(reason or "no reason recorded")).strip().splitlines()
    line = text[0] if text else "no reason recorded"
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 1] + "…"


@dataclass
class Group:
    termination: str
    reason: str
    count: int = 0
    models: set[str] = field(default_factory=set)


@dataclass
class ErrorGroups:
    """Errored and timed-out episodes by (termination, first line of the reason)."""

    groups: dict[tuple[str, str], Group] = field(default_factory=dict)

    def add(self, termination: str, reason: object, model: str) -> None:
        if termination not in ERROR_TERMINATIONS and termination != TIMEOUT:
            return
        key = (termination, first_line(reason))
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(*key)
        group.count += 1
        group.models.add(model)

    def count(self, terminations: tuple[str, ...] = ERROR_TERMINATIONS) -> int:
        return sum(g.count for g in self.groups.values() if g.termination in terminations)

    def ordered(self) -> list[Group]:
        """Largest group first; ties by termination and reason, so the order is stable."""
        return sorted(self.groups.values(), key=lambda g: (-g.count, g.termination, g.reason))

    def lines(self) -> list[str]:
        """One line per group (at most :data:`SHOWN`), then how many more."""
        ordered = self.ordered()
        out = [f"  {g.count} × {g.termination}: {g.reason} (models: "
               f"{', '.join(sorted(g.models))})" for g in ordered[:SHOWN]]
        if len(ordered) > SHOWN:
            rest = sum(g.count for g in ordered[SHOWN:])
            out.append(f"  ... and {rest} more episodes under {len(ordered) - SHOWN} other "
                       f"reasons (limbo list episodes RUN_DIR --termination T lists them)")
        return out

    def to_json(self) -> list[dict[str, object]]:
        return [{"termination": g.termination, "reason": g.reason, "count": g.count,
                 "models": sorted(g.models)} for g in self.ordered()]

    @classmethod
    def from_json(cls, items: list[dict[str, Any]]) -> ErrorGroups:
        """The groups :meth:`to_json` wrote."""
        out = cls()
        for item in items:
            key = (str(item["termination"]), str(item["reason"]))
            out.groups[key] = Group(*key, int(item["count"]), set(item["models"]))
        return out


def retry_command(argv: list[str] | None, with_timeouts: bool) -> str:
    """The command that retries a run's errored cells: the run's own command line (as its
    manifest recorded it, plugins and options included) with ``--retry-errors``."""
    flag = "--retry-errors=timeout" if with_timeouts else "--retry-errors"
    if not argv:
        return f"limbo run <the grid and flags of the run> --out <RUN_DIR> {flag}"
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            if arg in RETRY_CHOICES:
                continue
        if arg == "--retry-errors":
            skip = True
            continue
        if arg.startswith("--retry-errors="):
            continue
        kept.append(arg)
    return shlex.join(["limbo", *kept, flag])
