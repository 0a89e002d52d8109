"""Run one episode end to end and build its record (:class:`limbo.log.records.EpisodeRecord`).

The record is a pure function of the cell, except for ``runtime`` (and for an episode cut by
its wall-clock limit). Anything that goes wrong inside the sandbox or its adapter ends the
episode as ``infra_error`` with the reason recorded (see :mod:`limbo.episode.isolation`); a provider
that fails after retries ends it as ``model_error``; an episode past ``--episode-timeout`` ends
as ``timeout``. None of them is raised past this module, so a grid goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from limbo import __version__
from limbo.base.errors import ModelError
from limbo.base.registry import lookup
from limbo.base.runtime import host_facts, stopwatch
from limbo.episode.briefing import answer_key, brief, context
from limbo.episode.condition import Condition
from limbo.episode.harness import Harness, LoopResult
from limbo.episode.isolation import AdapterFailure, Isolated, escapes, where
from limbo.episode.models import ModelAdapter, make_adapter
from limbo.log.grading import grade
from limbo.log.records import (
    REPLICATE_SCHEMA,
    SCHEMA,
    EpisodeRecord,
    Header,
    Intent,
    LedgerEntry,
    Outcome,
    Runtime,
    WriteClass,
)
from limbo.sim.cell import Cell
from limbo.sim.config import dumped
from limbo.sim.events import TERMINATIONS, Termination
from limbo.sim.fault import Fault
from limbo.sim.world import Facts, World
from limbo.sim.worldfile.kit import Kit, kit


async def arun_episode(cell: Cell, adapter: ModelAdapter | None = None,
                       timeout: float | None = None,
                       make_harness: Callable[..., Harness] | None = None) -> EpisodeRecord:
    """Run ``cell`` and return its record, whatever the adapter, harness or plugins do: only a
    :class:`UsageError` (the user must fix something), the user's Ctrl-C and the cancellation
    of this episode's own task escape. ``timeout`` bounds the agent loop in wall-clock seconds
    (termination ``timeout``). ``make_harness`` builds the harness instead of the one
    registered as ``cell.harness`` (``limbo mcp`` serves the episode to an outside client)."""
    started = stopwatch()
    built = await _build(cell, adapter, make_harness)
    if isinstance(built, str):
        return unbuilt_record(cell, built, started)
    world, header, harness, isolated = built
    loop = await _drive(harness, timeout)
    if loop.termination not in TERMINATIONS:  # a plugin harness outside the closed set
        loop.termination, loop.reason = "infra_error", (
            f"harness {cell.harness} ended with termination {loop.termination!r:.40}, not one "
            f"of {', '.join(TERMINATIONS)}")
    problem = await isolated.close()
    if problem is not None and loop.termination not in FAILED:
        loop.termination, loop.reason = "infra_error", problem
    try:
        world.settle(cell.limits.settle_s)
    except Exception as exc:  # noqa: BLE001 - a fault's in-flight delivery failed
        loop.termination, loop.reason = "infra_error", where(exc)
    facts = world.facts()
    return _record(cell, header, _outcome(facts, loop), started, facts, loop)


FAILED = ("infra_error", "model_error", "timeout")


async def _build(cell: Cell, adapter: ModelAdapter | None,
                 make_harness: Callable[..., Harness] | None = None,
                 ) -> tuple[World, Header, Harness, Isolated] | str:
    """The episode's parts, or why they could not be built (the adapter closed)."""
    isolated: Isolated | None = None
    try:
        parts = _resolve(cell, make_harness)
        isolated = Isolated(adapter) if adapter else Isolated(_make(cell),
                                                              cell.model.split("?")[0])
        world = World(cell, parts.kit, parts.fault)
        opening = world.opening()
        header = Header(timing=dumped(cell.timing), limits=dumped(cell.limits),
                        prompts=parts.condition.prompt_hashes(), task_prompt=opening.prompt,
                        intents=cast(list[Intent], opening.intents), version=__version__,
                        plan_hash=opening.plan_hash)
        brief(isolated.inner, answer_key(world))  # a reference policy's key; no other's
        harness: Harness = parts.harness(world, isolated, parts.condition, context(world))
    except BaseException as exc:
        if escapes(exc):
            raise
        if isolated is not None:
            await isolated.close()
        return exc.args[0] if isinstance(exc, AdapterFailure) else where(exc)
    return world, header, harness, isolated


@dataclass(frozen=True)
class _Parts:
    """What the cell names, resolved: the registry is asked once per episode, here."""

    condition: Condition
    harness: Callable[..., Harness]
    kit: Kit
    fault: type[Fault]


def _resolve(cell: Cell, make_harness: Callable[..., Harness] | None) -> _Parts:
    """Every registry lookup the episode makes, up front (the adapter's is :func:`_make`)."""
    return _Parts(lookup("condition", cell.condition)(), make_harness or lookup("harness",
                                                                              cell.harness),
                  kit(cell.world), lookup("fault", cell.fault))


def _make(cell: Cell) -> ModelAdapter:
    """The cell's adapter, reaching its model the way the cell's transport says."""
    try:
        return make_adapter(cell.model, dict(cell.transport))
    except BaseException as exc:
        if escapes(exc):
            raise
        raise AdapterFailure(f"adapter {cell.model} could not be created: {where(exc)}") from None


async def _drive(harness: Harness, timeout: float | None) -> LoopResult:
    """Start and run the harness; how it ended, as a :class:`LoopResult`."""
    try:
        async with asyncio.timeout(timeout) as limit:
            await harness.start()
            return await harness.run()
    except TimeoutError as exc:
        if limit.expired():
            return _stop(harness, "timeout", f"the episode ran past --episode-timeout "
                                             f"{timeout:g}s (wall clock)")
        return _stop(harness, "infra_error", where(exc))
    except ModelError as exc:
        return _stop(harness, "model_error", str(exc))
    except AdapterFailure as exc:
        return _stop(harness, "infra_error", str(exc))
    except BaseException as exc:
        if escapes(exc):
            raise
        return _stop(harness, "infra_error", where(exc))


def _stop(harness: Harness, reason: Termination, detail: str) -> LoopResult:
    """``harness.stop``, or a bare result when the harness cannot even stop."""
    try:
        return harness.stop(reason, detail)
    except Exception as exc:  # noqa: BLE001 - a broken harness still ends in a record
        return LoopResult(termination="infra_error", reason=f"{detail}; then stop() raised "
                                                            f"{where(exc)}")


def unbuilt_record(cell: Cell, reason: str, started: float | None = None) -> EpisodeRecord:
    """The record of an episode that could not run at all (``infra_error``, with ``reason``)."""
    return _record(cell, _unbuilt_header(cell), _broken_outcome(reason),
                   stopwatch() if started is None else started)


def _record(cell: Cell, header: Header, outcome: Outcome, started: float,
            facts: Facts | None = None, loop: LoopResult | None = None) -> EpisodeRecord:
    """The record, its keys in the order they are written (``runtime`` last: what differs
    between two runs of one cell is cut off the end, :mod:`tools.same_records`)."""
    return EpisodeRecord(
        schema=REPLICATE_SCHEMA if cell.replicate else SCHEMA, episode_id=cell.episode_id,
        cell=cell.public(),
        header=header, outcome=outcome, report=loop.report if loop else None,
        events=facts.events if facts else [],
        ledger=cast(list[LedgerEntry], facts.ledger) if facts else [],
        usage=loop.usage if loop else [],
        runtime=cast(Runtime, {"wall_s": round(stopwatch() - started, 6), **host_facts(),
                               **(loop.runtime if loop else {})}),
    )


def _unbuilt_header(cell: Cell) -> Header:
    return Header(timing=dumped(cell.timing), limits=dumped(cell.limits), prompts={},
                  task_prompt=None, intents=[], version=__version__, plan_hash=None)


def _broken_outcome(reason: str) -> Outcome:
    """The outcome of an episode whose world could not be built: nothing ran."""
    graded = grade([], [], None)
    graded["task_success"] = graded["exactly_once"] = False
    return Outcome(**graded, fault_fired=False, agent_time_s=0.0, tool_calls=0, model_turns=0, input_tokens=0,
                   output_tokens=0, cost_usd=0.0, termination="infra_error",
                   termination_reason=reason)


def _outcome(facts: Facts, loop: LoopResult) -> Outcome:
    graded = grade(cast(list[Intent], facts.intents), cast(list[LedgerEntry], facts.ledger),
                   loop.report, cast(WriteClass | None, facts.focal_class))
    costs = [u["cost_usd"] for u in loop.usage]
    return Outcome(
        fault_fired=facts.fault_fired,
        **graded,
        agent_time_s=loop.agent_time_s,
        tool_calls=loop.tool_calls,
        model_turns=loop.turns,
        input_tokens=sum(u["input_tokens"] for u in loop.usage),
        output_tokens=sum(u["output_tokens"] for u in loop.usage),
        cost_usd=None if any(c is None for c in costs) else round(sum(costs), 8),
        termination=loop.termination,
        termination_reason=loop.reason,
    )


def run_episode(cell: Cell, adapter: ModelAdapter | None = None,
                timeout: float | None = None) -> EpisodeRecord:
    """Synchronous wrapper of :func:`arun_episode`."""
    return asyncio.run(arun_episode(cell, adapter, timeout))
