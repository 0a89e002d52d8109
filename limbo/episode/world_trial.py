"""The last check of a world file: each template's own plan, followed with no fault, must set
up, run and succeed exactly once.

The rules (:mod:`limbo.sim.worldfile.check`) read the file; this runs it. It catches what
only the played world can tell: a setup step the world refuses (an update whose record is not
in the state it requires, an id written by hand where the world mints its own), an intent the
plan's own call does not satisfy (a ``contains`` text the step's argument lacks), a save that
does not find its value. Without it each would surface as an ``infra_error`` or as a task
that no agent can complete, in every cell of the template.

One episode per template (instance 0, the ``blind`` reference policy, which follows the plan
and nothing else), not recorded; a few milliseconds each, and once per world per process.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from limbo.episode.run_one import run_episode
from limbo.sim.cell import Cell
from limbo.sim.worldfile.kit import Kit, kit
from limbo.sim.worldfile.source import WorldFileError, WorldProblem, read

POLICY = "policy/blind"
"""Follows the plan step by step; with no fault, exactly what a correct agent does."""


def tried(world: Kit, path: Path | str | None = None) -> Kit:
    """``world``, once each of its templates' plans succeeds; a :class:`WorldFileError`
    placing the first that does not otherwise (in ``path``, as the user named the file)."""
    problems = trial_problems(world, path)
    if problems:
        raise WorldFileError(problems)
    return world


def trial_problems(world: Kit, path: Path | str | None = None) -> list[WorldProblem]:
    """One problem per template whose plan, followed with no fault, does not succeed exactly
    once (none for a proxy-only world: LIMBO does not play it)."""
    if world.identity is None or world.proxy or world.declared is None:
        return []
    return list(_problems(world.identity, str(path or world.source["path"])))


@cache
def _problems(identity: str, path: str) -> tuple[WorldProblem, ...]:
    world = kit(identity)
    assert world.declared is not None
    source = read(Path(path))
    found = []
    for i, declared in enumerate(world.declared.templates):
        t = world.templates[declared.id]
        cell = Cell(model=POLICY, template=t.id, service=t.service, focal_write=t.focal_writes[0],
                    world=identity)
        outcome = run_episode(cell)["outcome"]
        said = _failure(outcome)
        if said is not None:
            at = _where(declared.model_dump(), i, outcome)
            file, line = source.where(at)
            found.append(WorldProblem(file, line, f"template {t.id!r}: its own plan, followed "
                                                  f"with no fault, {said}", at))
    return tuple(found)


def _failure(outcome: Mapping[str, Any]) -> str | None:
    """What went wrong in a no-fault episode of the plan (``None``: nothing)."""
    if outcome["termination"] != "finished":
        reason = str(outcome.get("termination_reason") or outcome["termination"])
        return f"ends {outcome['termination']}: {reason.split(' @ ')[0]}"
    missed = [i for i, n in outcome["commits"].items() if n == 0]
    twice = [i for i, n in outcome["commits"].items() if n > 1]
    if missed:
        return (f"does not produce the effect of intent {', '.join(missed)}: the step's "
                f"arguments do not satisfy its own intent (match and contains)")
    if twice or not outcome["exactly_once"]:
        return f"produces an effect twice ({', '.join(twice) or 'a duplicate'})"
    return None


def _where(template: Mapping[str, Any], index: int,
           outcome: Mapping[str, Any]) -> tuple[str | int, ...]:
    """The step a failure names (a setup step by id in the reason, an intent's step), else
    the template."""
    reason = str(outcome.get("termination_reason") or "")
    for j, step in enumerate(template["setup"]):
        if f"setup step {step['id']} " in reason:
            return ("templates", index, "setup", j)
    missed = {i.split("[")[0] for i, n in (outcome.get("commits") or {}).items() if n == 0}
    for j, step in enumerate(template["steps"]):
        if step["id"] in missed:
            return ("templates", index, "steps", j, "intent")
    return ("templates", index)
