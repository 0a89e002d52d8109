"""An episode's record (:class:`limbo.log.records.EpisodeRecord`), from what the episode
runner (:mod:`limbo.episode.run_one`) hands it: the cell, the header fixed before the first
turn, the world's :class:`~limbo.sim.world.Facts` and how the loop ended — or, for an episode
whose parts could not be built, only why."""

from __future__ import annotations

from typing import cast

from limbo import __version__
from limbo.base.runtime import host_facts, stopwatch
from limbo.episode.harness import LoopResult
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
from limbo.sim.world import Facts, Opening


def header(cell: Cell, prompts: dict[str, str], opening: Opening | None) -> Header:
    """The record's header: the cell's settings, the condition's prompt digests and the task
    as fixed before the first turn (``None``: the world was never built)."""
    return Header(timing=dumped(cell.timing), limits=dumped(cell.limits), prompts=prompts,
                  task_prompt=opening.prompt if opening else None,
                  intents=cast(list[Intent], opening.intents) if opening else [],
                  version=__version__, plan_hash=opening.plan_hash if opening else None)


def episode_record(cell: Cell, started: float, prompts: dict[str, str], opening: Opening | None,
                   facts: Facts | None, loop: LoopResult | None,
                   reason: str | None = None) -> EpisodeRecord:
    """The record, its keys in the order they are written (``runtime`` last: what differs
    between two runs of one cell is cut off the end, :mod:`tools.same_records`). Without
    ``facts`` and ``loop`` the episode never ran: ``infra_error`` with ``reason``, and a
    header of the cell's settings alone."""
    if facts is None or loop is None:
        outcome, facts, loop, prompts, opening = _broken_outcome(reason or ""), None, None, {}, None
    else:
        outcome = _outcome(facts, loop)
    head = header(cell, prompts, opening)
    return EpisodeRecord(
        schema=REPLICATE_SCHEMA if cell.replicate else SCHEMA, episode_id=cell.episode_id,
        cell=cell.public(),
        header=head, outcome=outcome, report=loop.report if loop else None,
        events=facts.events if facts else [],
        ledger=cast(list[LedgerEntry], facts.ledger) if facts else [],
        usage=loop.usage if loop else [],
        runtime=cast(Runtime, {"wall_s": round(stopwatch() - started, 6), **host_facts(),
                               **(loop.runtime if loop else {})}),
    )


def unbuilt_record(cell: Cell, reason: str, started: float | None = None) -> EpisodeRecord:
    """The record of an episode that could not run at all (``infra_error``, with ``reason``)."""
    return episode_record(cell, stopwatch() if started is None else started, {}, None, None,
                          None, reason)


def _broken_outcome(reason: str) -> Outcome:
    """The outcome of an episode whose world could not be built: nothing ran."""
    graded = grade([], [], None)
    graded["task_success"] = graded["exactly_once"] = False
    return Outcome(**graded, fault_fired=False, agent_time_s=0.0, tool_calls=0, model_turns=0,
                   input_tokens=0, output_tokens=0, cost_usd=0.0, termination="infra_error",
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
