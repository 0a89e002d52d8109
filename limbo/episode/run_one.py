"""Run one episode end to end and build its record (:class:`limbo.log.records.EpisodeRecord`).

One line of steps: resolve every name the cell holds — condition, harness, fault mode, the
adapter, the world's parts — once, up front; build the world and the harness; drive the
harness over the world's face (:func:`limbo.episode.isolation.drive`); close the adapter;
settle the world; grade its facts into the record (:mod:`limbo.episode.record`).

The record is a pure function of the cell, except for ``runtime`` (and for an episode cut by
its wall-clock limit). Anything that goes wrong inside the sandbox or its adapter ends the
episode as ``infra_error`` with the reason recorded (see :mod:`limbo.episode.isolation`); a provider
that fails after retries ends it as ``model_error``; an episode past ``--episode-timeout`` ends
as ``timeout``. None of them is raised past this module, so a grid goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from limbo.base.registry import lookup
from limbo.base.runtime import stopwatch
from limbo.episode.briefing import answer_key, brief, context
from limbo.episode.condition import Condition
from limbo.episode.harness import Harness
from limbo.episode.isolation import AdapterFailure, Isolated, drive, escapes, where
from limbo.episode.models import ModelAdapter, adapter_maker
from limbo.episode.record import episode_record
from limbo.log.records import EpisodeRecord
from limbo.sim.cell import Cell
from limbo.sim.events import TERMINATIONS
from limbo.sim.parts import parts
from limbo.sim.world import Facts, World

FAILED = ("infra_error", "model_error", "timeout")


@dataclass
class _Built:
    """What :func:`_build` made of a cell: all of it, or what it made before ``reason``."""

    world: World | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    harness: Harness | None = None
    isolated: Isolated | None = None
    reason: str | None = None


async def arun_episode(cell: Cell, adapter: ModelAdapter | None = None,
                       timeout: float | None = None,
                       make_harness: Callable[..., Harness] | None = None) -> EpisodeRecord:
    """Run ``cell`` and return its record, whatever the adapter, harness or plugins do: only a
    :class:`UsageError` (the user must fix something), the user's Ctrl-C and the cancellation
    of this episode's own task escape. ``timeout`` bounds the agent loop in wall-clock seconds
    (termination ``timeout``). ``make_harness`` builds the harness instead of the one
    registered as ``cell.harness`` (``limbo mcp`` serves the episode to an outside client)."""
    started = stopwatch()
    built = _build(cell, adapter, make_harness)
    loop = await drive(built.harness, timeout) if built.harness is not None else None
    problem = await built.isolated.close() if built.isolated is not None else None
    facts: Facts | None = None
    if loop is not None and built.world is not None:
        if loop.termination not in TERMINATIONS:  # a plugin harness outside the closed set
            loop.termination, loop.reason = "infra_error", (
                f"harness {cell.harness} ended with termination {loop.termination!r:.40}, "
                f"not one of {', '.join(TERMINATIONS)}")
        if problem is not None and loop.termination not in FAILED:
            loop.termination, loop.reason = "infra_error", problem
        try:
            built.world.settle(cell.limits.settle_s)
        except Exception as exc:  # noqa: BLE001 - a fault's in-flight delivery failed
            loop.termination, loop.reason = "infra_error", where(exc)
        facts = built.world.facts()
    return episode_record(cell, started, built.prompts,
                          built.world.opening() if built.world else None, facts, loop, built.reason)


def _build(cell: Cell, adapter: ModelAdapter | None,
           make_harness: Callable[..., Harness] | None = None) -> _Built:
    """The episode's parts, every name resolved first; or what was made before the step that
    failed, and why it failed."""
    built = _Built()
    try:
        if adapter is not None:  # the caller's: closed whatever fails from here on
            built.isolated = Isolated(adapter)
        condition: Condition = lookup("condition", cell.condition)()
        harness_cls = make_harness or lookup("harness", cell.harness)
        fault = lookup("fault", cell.fault)
        maker = adapter_maker(cell.model, dict(cell.transport)) if adapter is None else None
        world = built.world = World(cell, parts(cell, fault))
        built.prompts = condition.prompt_hashes()
        if maker is not None:  # made last: nothing built before it needs closing
            built.isolated = Isolated.made(maker, cell.model.split("?")[0])
        assert built.isolated is not None  # the caller's, or made just now
        brief(built.isolated.inner, answer_key(world))  # a reference policy's key; no other's
        built.harness = harness_cls(world, built.isolated, condition, context(world))
    except BaseException as exc:
        if escapes(exc):
            raise
        built.harness = None
        built.reason = exc.args[0] if isinstance(exc, AdapterFailure) else where(exc)
    return built


def run_episode(cell: Cell, adapter: ModelAdapter | None = None,
                timeout: float | None = None) -> EpisodeRecord:
    """Synchronous wrapper of :func:`arun_episode`."""
    return asyncio.run(arun_episode(cell, adapter, timeout))
