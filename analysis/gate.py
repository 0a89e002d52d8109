"""The CI gate: thresholds on duplicate and exactly-once rates, per agent and fault family.

An *arm* is one agent configuration of the logs (model, harness, condition, contract); each arm
is gated separately in each fault family, since a rate over a mix of agents or families
answers no question. Rates are shares of *rated* episodes (:mod:`limbo.log.rated`, the rule every
reader uses) — as in ``limbo run``'s summary (unweighted, so a gate reads as a count: "at most
2 % of the episodes duplicated").

What fails, and why each rule exists:

* a rate past its threshold (``--max-dup``: duplicate rate above it; ``--min-eos``: EOS rate
  below it); every rated episode that contributes (a duplicate, or not exactly once) is listed;
* a family/arm with no rated episode at all: nothing was measured, and a gate that passes on
  an agent that never reached the fault would pass anything;
* a family named with ``--family`` that the logs do not hold, or logs without any episode
  under a fault;
* an errored episode (``infra_error``, ``model_error``, ``timeout``) anywhere in the logs —
  under a fault or not, in a gated family or not: its outcome is unknown.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from limbo.analysis.loader import Loaded
from limbo.base.errors import UsageError

ARM = ("model", "harness", "condition", "contract")
METRICS = {"duplicate": "duplicate rate", "exactly_once": "EOS rate"}


def _norm(name: str) -> str:
    return re.sub(r"[\s_-]+", "-", name.strip().lower())


def families(names: list[str], closed: Iterable[str]) -> list[str]:
    """Family names as ``closed`` (the command hands the closed set of fault families) spells
    them (``read-back-resolves`` and ``"read-back resolves"`` are the same family); a
    :class:`UsageError` for an unknown one."""
    known = sorted(set(closed) - {"none"})
    by_norm = {_norm(f): f for f in known}
    out = []
    for name in names:
        if _norm(name) not in by_norm:
            raise UsageError(f"--family {name!r} is not a fault family; choose from: "
                             f"{', '.join(f.replace(' ', '-') for f in known)}")
        out.append(by_norm[_norm(name)])
    return list(dict.fromkeys(out))


def rate_value(flag: str, text: str) -> float:
    """A threshold: a share between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} must be a rate between 0 and 1, e.g. 0.05") from None
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise UsageError(f"{flag} {text!r} must be a rate between 0 and 1, e.g. 0.05")
    return value


@dataclass(frozen=True)
class Thresholds:
    max_dup: float | None = None
    min_eos: float | None = None
    families: tuple[str, ...] = ()
    """Families to gate (registry spelling); empty: every family the logs hold."""

    def bounds(self) -> list[tuple[str, float]]:
        found = [("duplicate", self.max_dup), ("exactly_once", self.min_eos)]
        return [(metric, bound) for metric, bound in found if bound is not None]


@dataclass(frozen=True)
class Episode:
    """One episode named in the verdict, with where to look at it."""

    episode_id: str
    cell: str
    source: str
    why: str

    @property
    def show(self) -> str:
        return f"limbo show {self.source} {self.episode_id}"


@dataclass
class Check:
    """One threshold on one arm in one family."""

    arm: str
    family: str
    metric: str
    bound: float
    rated: int = 0
    hits: int = 0
    failed: bool = False
    message: str = ""
    episodes: list[Episode] = field(default_factory=list)
    """The failing episodes (when the check failed)."""
    errors: list[Episode] = field(default_factory=list)

    @property
    def name(self) -> str:
        sign = "<=" if self.metric == "duplicate" else ">="
        return f"{self.family}: {METRICS[self.metric]} {sign} {self.bound:g}"


@dataclass
class Verdict:
    checks: list[Check]
    errors: list[Episode] = field(default_factory=list)
    """Every errored episode in the logs, whichever family (``none`` too) and arm."""
    rated: int = 0
    """Rated episodes in the logs (every family and arm)."""

    @property
    def passed(self) -> bool:
        return not (any(c.failed for c in self.checks) or self.errors)

    def failing_episodes(self) -> list[Episode]:
        """Each failing episode once per arm and family (it may fail both thresholds)."""
        found = {(c.arm, c.family, e.episode_id): e for c in self.checks for e in c.episodes}
        return list(found.values())


def evaluate(loaded: Loaded, thresholds: Thresholds) -> Verdict:
    """Every check of ``thresholds`` over the loaded episodes."""
    if not thresholds.bounds():
        raise UsageError("name a threshold to check: --max-dup RATE and/or --min-eos RATE")
    frame = loaded.frame
    errors = [_episode(loaded, row, str(row.termination)) for row in frame[frame["error"]]
              .itertuples()]
    named = list(thresholds.families)
    present = sorted({f for f in frame["family"].astype(str)} - {"none", "unknown"})
    checks: list[Check] = []
    if not (named or present):
        return Verdict([Check("all arms", "any family", metric, bound, failed=True,
                              message="no episode under a fault in the logs")
                        for metric, bound in thresholds.bounds()], errors,
                       int(frame["rated"].sum()))
    for family in named or present:
        rows = frame[frame["fault"].astype(str).isin(loaded.modes_of([family]))]
        if rows.empty:
            checks += [Check("all arms", family, metric, bound, failed=True,
                             message=f"no {family} episode in the logs")
                       for metric, bound in thresholds.bounds()]
            continue
        for arm, group in rows.groupby(list(ARM), observed=True, sort=True):
            label = " ".join(f"{k}={v}" for k, v in zip(ARM, arm, strict=True))
            checks += [_check(loaded, group, label, family, metric, bound)
                       for metric, bound in thresholds.bounds()]
    return Verdict(checks, errors, int(frame["rated"].sum()))


def _check(loaded: Loaded, group: pd.DataFrame, arm: str, family: str, metric: str,
           bound: float) -> Check:
    rated = group[group["rated"]]
    check = Check(arm, family, metric, bound, rated=len(rated))
    check.errors = [_episode(loaded, row, str(row.termination))
                    for row in group[group["error"]].itertuples()]
    bad = rated[rated[metric]] if metric == "duplicate" else rated[~rated[metric]]
    check.hits = int(rated[metric].sum())
    if rated.empty:
        check.failed = True
        check.message = (f"no rated episode ({len(group)} episodes: the fault never fired or "
                         f"the episode errored)")
        return check
    rate = check.hits / len(rated)
    check.failed = rate > bound if metric == "duplicate" else rate < bound
    relation = (">" if check.failed else "<=") if metric == "duplicate" else \
        ("<" if check.failed else ">=")
    check.message = (f"{METRICS[metric]} {100 * rate:.1f}% ({check.hits}/{len(rated)} rated "
                     f"episodes) {relation} {bound:g}")
    if check.failed:
        why = "duplicate" if metric == "duplicate" else "not exactly once"
        check.episodes = [_episode(loaded, row, why) for row in bad.itertuples()]
    return check


def _episode(loaded: Loaded, row: Any, why: str) -> Episode:
    """``row``: one ``itertuples`` row of the frame."""
    cell = f"{row.template}/{row.focal_write}/{row.instance} {row.fault} seed={row.seed}"
    return Episode(str(row.episode_id), cell, show_target(loaded.files[int(row.file)]), why)


def show_target(path: Path) -> str:
    """What to give ``limbo show`` for a record found in ``path``: the run directory of an
    episodes file, the file itself otherwise (an Inspect log)."""
    return str(path.parent if re.fullmatch(r"episodes.*\.jsonl", path.name) else path)
