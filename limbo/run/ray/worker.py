"""The worker side of a Ray run: :class:`EpisodeWorker`, a Ray actor that runs batches of
cells and streams their records back as the episodes end.

A worker never writes anything: it answers each record as its encoded line (plus the cell and
outcome the driver's summary needs), and the driver alone appends them to the run directory,
exactly as forked workers send theirs over a pipe (:mod:`limbo.run.local`), as they end: a
driver stopped mid-run has written every episode that ended more than a moment before, not
only the batches that ended. A cell that runs again — its worker's node died — costs time,
never a record: the driver keeps the first record of each episode id and drops any later
one.

Why an actor, not a task per batch: an actor is one long-lived process with one event loop,
so it holds the provider clients its episodes share (:func:`limbo.providers.clients.bound`)
for the whole run, as a local worker does; and the driver keeps two batches in each worker,
the second one's cells waiting on the same ``--concurrency`` semaphore, so a batch's slowest
episode never leaves the others idle (a task per batch would end in a tail every batch). The
actor is made while the driver still plans the run, so its imports cost no run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from limbo import __version__
from limbo.base import environ
from limbo.base.errors import UsageError
from limbo.log.records import EpisodeRecord
from limbo.providers.clients import ClientPool, bound
from limbo.providers.options import using
from limbo.run.budget import Budget, cost_of
from limbo.run.context import Settings
from limbo.run.local import HOLD_S, counted_episode, encoded, freeze_heap
from limbo.run.summary import tallied
from limbo.sim.cell import Cell

Item = tuple[str, bytes, Mapping[str, Any], Mapping[str, Any]]
"""A record: its episode id, its line, its cell and its outcome."""
Ended = tuple[Cell, EpisodeRecord | None]
"""A cell and its record (``None``: the budget refused to start it)."""


@dataclass(frozen=True)
class Setup:
    """What every batch of a run needs besides its cells: the run's context, as the driver
    read it; applied once per worker and run."""

    run: str
    """The run's token: a new run, a new setup."""
    settings: Settings
    watched: tuple[str, ...] = ()
    """Environment variables the driver's adapters read keys from: secrets to scrub here too."""
    env: tuple[tuple[str, str], ...] = ()
    """The driver's variables the episodes need (:func:`limbo.run.ray.session.forwarded`),
    bound around them (:func:`limbo.base.environ.bound`), never written to ``os.environ``."""
    limiter: Any = None
    """The session's :class:`~limbo.run.leases.SlotKeeper` actor."""
    budget: Budget | None = None
    """The pass's budget (``--max-cost``): asked before each episode starts."""


@dataclass
class CellBatch:
    """A batch's answer: the records of its cells, in the order they ended, and where it ran."""

    node: str
    version: str
    items: list[Item] = field(default_factory=list)
    refused: int = 0
    """Cells not run because the budget refused them: the driver hands out no more."""
    usage: str | None = None
    """A :class:`UsageError` that stopped the batch (a rejected key): the run stops."""
    crash: str | None = None
    """The traceback of a bug that stopped the batch."""


class EpisodeWorker:
    """One per CPU of the cluster (made a Ray actor by :mod:`limbo.run.ray.cluster`)."""

    def __init__(self, name: str, preload: tuple[str, ...] = ()) -> None:
        import limbo.episode.run_one  # noqa: F401 - the heavy imports, while the driver plans

        self.name = name
        """What the limiter knows this worker by (its lessee)."""
        self.warm(preload)
        self.pool = ClientPool()
        self.run: str | None = None
        self.gate = asyncio.Semaphore(1)
        self.applied: set[str] = set()
        """Plugins this process has loaded (each once)."""
        freeze_heap()  # what it imported lives as long as it does

    def warm(self, preload: tuple[str, ...]) -> None:
        """Import the SDKs the driver's model checks imported: the first episodes need them."""
        import importlib

        for module in preload:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)

    def _prepare(self, setup: Setup) -> None:
        if self.run == setup.run:
            return
        from limbo.base import secrets
        from limbo.providers import limiter
        from limbo.run.ray.leases import RayLimiter

        self._apply(setup.settings)
        for var in setup.watched:
            secrets.watch(var)
        actor = setup.limiter
        limiter.set_limiter_factory(
            None if actor is None else (lambda key: RayLimiter(key, actor, self.name)))
        self.gate = asyncio.Semaphore(setup.settings.concurrency)
        self.run = setup.run

    def _apply(self, settings: Settings) -> None:
        """Run episodes as the driver's settings say: plugins, worlds, and price files that
        can be read here (the cache and prices are bound around the episodes, not kept)."""
        from limbo.base.registry import load_plugin
        from limbo.providers import pricing
        from limbo.sim.worldfile.kit import load_world

        for plugin in settings.plugins:
            if plugin not in self.applied:
                load_plugin(plugin)
                self.applied.add(plugin)
        for path in settings.worlds:
            load_world(path)  # once per file and version: a loaded world is kept
        for path in settings.providers.price_files:  # one line now, not an error per episode
            pricing.check_price_file(path)

    async def run_batch(self, cells: list[Cell], setup: Setup) -> AsyncIterator[CellBatch]:
        """Run ``cells``, at most ``setup.concurrency`` episodes of this worker at a time (over
        all its batches), yielding the records of the episodes that ended, a few at a time,
        as they end (a Ray streaming generator: the driver writes each record without waiting
        for the rest of the batch). A stop (a :class:`UsageError`, a bug) is the last answer's
        ``usage`` or ``crash``; never raises."""
        import ray

        node = ray.get_runtime_context().get_node_id()
        try:
            self._prepare(setup)
            # the episodes' tasks keep the clients and variables bound when they started
            with bound(self.pool), environ.bound(dict(setup.env)), \
                    using(setup.settings.providers):
                tasks = [asyncio.ensure_future(self._one(cell, setup)) for cell in cells]
        except Exception as exc:  # noqa: BLE001 - a rejected plugin, a bug: the run stops
            yield _stopped(node, exc)
            return
        try:
            async for ended in _as_they_end(tasks):
                yield self._answer(node, ended)
        except Exception as exc:  # noqa: BLE001 - a rejected key, a bug: the run stops
            yield _stopped(node, exc)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, cell: Cell, setup: Setup) -> Ended:
        """Run ``cell`` once the gate and the budget let it start; ``None``: refused."""
        budget = setup.budget
        async with self.gate:
            if budget is not None and not await budget.admit():
                return cell, None
            try:
                record = await counted_episode(cell, setup.settings.episode_timeout)
            except BaseException:
                if budget is not None:
                    await budget.abandon()
                raise
            if budget is not None:
                await budget.settle(cost_of(record))
            return cell, record

    def _answer(self, node: str, ended: list[Ended]) -> CellBatch:
        from limbo.base.secrets import scrubber

        scrub = scrubber()  # after the episodes: their adapters have named the keys they read
        return CellBatch(node=node, version=__version__, items=[
            (cell.episode_id, encoded(record, cell, scrub), *tallied(record))
            for cell, record in ended if record is not None],
            refused=sum(1 for _, record in ended if record is None))


async def _as_they_end(tasks: list[asyncio.Task[Ended]]) -> AsyncIterator[list[Ended]]:
    """The tasks' results in groups, as they end: the first to end, and those that end within
    :data:`~limbo.run.local.HOLD_S` of it, as a forked worker groups its records (one Ray object
    per episode would cost a CPU-bound worker more than its episodes). A task that failed
    raises, after the group it ended in."""
    pending: set[asyncio.Task[Ended]] = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            more, pending = await asyncio.wait(pending, timeout=HOLD_S)
            done |= more
        failed = [task for task in done if task.exception() is not None]
        ended = [task.result() for task in done if task not in failed]
        if ended:
            yield ended
        if failed:
            raise failed[0].exception()  # type: ignore[misc]


def _stopped(node: str, exc: Exception) -> CellBatch:
    """The last answer of a batch that ``exc`` stopped: why, and no record."""
    batch = CellBatch(node=node, version=__version__)
    if isinstance(exc, UsageError):
        batch.usage = str(exc)
    else:
        batch.crash = "".join(traceback.format_exception(exc))
    return batch
