"""Running episodes in this process, with asyncio concurrency: :class:`InProcess`, and the
stream of episodes every executor's workers run (:func:`stream`).

Every finished episode is written at once, one write per record, so a kill loses only the
episodes in flight. At most ``concurrency`` episodes run at a time (model grids are I/O-bound);
under ``--max-cost`` each one starts only once the run's budget admits it
(:mod:`limbo.run.budget`), and once the budget refuses one, no other starts here. Forked
workers (:mod:`limbo.run.forked`) and Ray workers run the same stream on their cells.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from limbo.base.errors import UsageError
from limbo.episode.record import unbuilt_record
from limbo.episode.run_one import arun_episode
from limbo.log.records import EpisodeRecord
from limbo.log.store import encode
from limbo.providers.calls import counting
from limbo.providers.clients import ClientPool, bound, shared_clients
from limbo.providers.options import using
from limbo.run.budget import Budget, LocalBudget, cost_of
from limbo.run.context import RunContext, Settings, Sink
from limbo.run.summary import tallied
from limbo.sim.cell import Cell

Emit = Callable[[bytes, Mapping[str, Any], Mapping[str, Any]], None]
CHUNK = 32
"""Cells handed to a worker at a time (a forked worker's chunk, a quarter of a Ray batch)."""
HOLD_S = 0.02
"""The longest a worker (forked or Ray) holds a finished record before sending it on."""


class RunAborted(UsageError):
    """The run cannot go on (a worker died); what finished is on disk, a re-run resumes."""


def freeze_heap() -> None:
    """Take every object alive now out of the cyclic collector's sight, for good.

    What a process holds when its episodes start (modules, the SDKs, the cells to run) lives
    until it exits, yet each full collection during the run walked all of it: about 0.2 s with
    the SDKs loaded, during which no answer waiting on the event loop is read. Frozen, a
    collection walks only what the episodes made. Forked workers inherit the frozen heap and,
    since a collection no longer writes to it, keep sharing its pages. Called once by each
    ``limbo run`` process, each forked worker (whose inherited heap, the parent's cells
    among it, lives until it exits) and each Ray worker, never by library code: a caller that
    lives on would keep what it frees later in a cycle."""
    gc.freeze()


async def counted_episode(cell: Cell, timeout: float | None) -> EpisodeRecord:
    """One episode, with how its model turns were answered — by the provider or from the
    response cache — in ``runtime.model_calls`` (:mod:`limbo.providers.calls`)."""
    with counting() as calls:
        record = await arun_episode(cell, timeout=timeout)
    if calls.seen:
        cast(dict[str, Any], record["runtime"])["model_calls"] = calls.to_json()
    return record


def encoded(record: EpisodeRecord, cell: Cell, scrub: Callable[[str], str]) -> bytes:
    """The record's line; a record that cannot be written as strict JSON becomes an
    ``infra_error`` record of its cell saying why, so the grid goes on and the cell is counted."""
    try:
        return encode(record, scrub)
    except ValueError as exc:
        return encode(unbuilt_record(cell, f"the record could not be written: {exc}"), scrub)


# ------------------------------------------------------------------ in this process


class InProcess:
    """:class:`~limbo.run.context.Executor` of this process: ``--concurrency`` episodes at once
    on one event loop, sharing its provider clients and its own call limiters."""

    def budget(self, max_cost: float) -> Budget:
        return LocalBudget(max_cost)

    def run(self, cells: Iterator[Cell], ctx: RunContext, budget: Budget | None,
            sink: Sink) -> None:
        def write(cell: Cell, record: EpisodeRecord) -> None:
            sink.emit(encoded(record, cell, sink.scrub), *tallied(record))

        asyncio.run(stream(cells, ctx.settings, write, budget))

    def limits(self) -> dict[str, dict[str, int]] | None:
        return None

    def close(self) -> None:
        pass


async def stream(cells: Iterator[Cell], settings: Settings,
                 sink: Callable[[Cell, EpisodeRecord], None], budget: Budget | None = None,
                 pool: ClientPool | None = None) -> None:
    """Run ``cells`` with at most ``settings.concurrency`` in flight, handing each record to
    ``sink`` as its episode ends; stop starting episodes once ``budget`` refuses one. The
    episodes share provider clients: ``pool``'s, left open, or a pool of their own, closed when
    the last one ends; they use the settings' cache and price files, whatever another run of
    this process uses."""
    run = _Stream(settings, sink, budget)
    with using(settings.providers):
        if pool is not None:
            with bound(pool):
                await run.cells(cells)
            return
        async with shared_clients():
            await run.cells(cells)


class _Stream:
    def __init__(self, settings: Settings, sink: Callable[[Cell, EpisodeRecord], None],
                 budget: Budget | None) -> None:
        self.settings, self.sink, self.budget = settings, sink, budget
        self.stopped = False

    async def one(self, cell: Cell) -> None:
        try:
            record = await counted_episode(cell, self.settings.episode_timeout)
        except BaseException:
            if self.budget is not None:
                await self.budget.abandon()
            raise
        if self.budget is not None:
            await self.budget.settle(cost_of(record))
        self.sink(cell, record)

    async def cells(self, cells: Iterator[Cell]) -> None:
        """Run ``cells`` on ``concurrency`` lanes, each taking the next cell as soon as its
        episode ends, in the same step: no turn of the event loop between an episode's end and
        the next one's start (a central loop that waited for any episode to end and then
        started one took a turn or two, each behind every other ready episode's work: about
        12 ms an episode at 64 in flight)."""
        source = iter(cells)  # one stream of cells, shared by the lanes
        lanes = [asyncio.ensure_future(self._lane(source))
                 for _ in range(max(1, self.settings.concurrency))]
        try:
            done, _ = await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
            for lane in done:
                lane.result()  # a UsageError (a rejected API key) or a failed write stops the run
        finally:
            for lane in lanes:
                lane.cancel()
            await asyncio.wait(lanes)

    async def _lane(self, cells: Iterator[Cell]) -> None:
        """Episodes one after another, while cells remain and the budget admits them; once it
        refuses one, no lane starts another."""
        for cell in cells:
            if self.stopped:
                return
            if self.budget is not None and not await self.budget.admit():
                self.stopped = True
                return
            await self.one(cell)
