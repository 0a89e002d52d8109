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
import os
import traceback
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.log.records import EpisodeRecord
from limbo.providers.clients import ClientPool, bound
from limbo.run.local import HOLD_S, encoded, freeze_heap
from limbo.sim.cell import Cell

Item = tuple[str, bytes, Mapping[str, Any], Mapping[str, Any]]
"""A record: its episode id, its line, its cell and its outcome."""


@dataclass(frozen=True)
class Setup:
    """What every batch of a run needs besides its cells; applied once per worker."""

    run: str
    """The run's token: a new run, a new setup."""
    concurrency: int
    timeout: float | None
    plugins: tuple[str, ...] = ()
    worlds: tuple[str, ...] = ()
    """World files (absolute paths) the cells run in."""
    cache_root: str | None = None
    watched: tuple[str, ...] = ()
    """Environment variables the driver's adapters read keys from: secrets to scrub here too."""
    env: tuple[tuple[str, str], ...] = ()
    """The driver's variables a worker needs (:func:`limbo.run.ray.session.forwarded`)."""
    limiter: Any = None
    """The run's :class:`~limbo.run.ray.leases.LimiterActor` handle."""


@dataclass
class CellBatch:
    """A batch's answer: the records of its cells, in the order they ended, and where it ran."""

    node: str
    version: str
    items: list[Item] = field(default_factory=list)
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
        self.plugins: set[str] = set()
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
        from limbo.base.registry import load_plugin
        from limbo.providers import cache, limiter
        from limbo.run.ray.leases import RayLimiter
        from limbo.sim.worldfile.kit import load_world

        for plugin in setup.plugins:
            if plugin not in self.plugins:
                load_plugin(plugin)
                self.plugins.add(plugin)
        for path in setup.worlds:
            load_world(path)  # once per file and version: a loaded world is kept
        os.environ.update(setup.env)
        cache.configure(setup.cache_root)
        for var in setup.watched:
            secrets.watch(var)
        actor = setup.limiter
        limiter.set_limiter_factory(
            None if actor is None else (lambda key: RayLimiter(key, actor, self.name)))
        self.gate = asyncio.Semaphore(setup.concurrency)
        self.run = setup.run

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
            with bound(self.pool):  # the episodes' tasks keep the binding they started with
                tasks = [asyncio.ensure_future(self._one(cell, setup.timeout)) for cell in cells]
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

    async def _one(self, cell: Cell, timeout: float | None) -> tuple[Cell, EpisodeRecord]:
        from limbo.episode.run_one import arun_episode

        async with self.gate:
            return cell, await arun_episode(cell, timeout=timeout)

    def _answer(self, node: str, ended: list[tuple[Cell, EpisodeRecord]]) -> CellBatch:
        from limbo.base.secrets import scrubber

        scrub = scrubber()  # after the episodes: their adapters have named the keys they read
        return CellBatch(node=node, version=__version__, items=[
            (cell.episode_id, encoded(record, cell, scrub), record["cell"], record["outcome"])
            for cell, record in ended])


async def _as_they_end(tasks: list[asyncio.Task[tuple[Cell, EpisodeRecord]]],
                       ) -> AsyncIterator[list[tuple[Cell, EpisodeRecord]]]:
    """The tasks' results in groups, as they end: the first to end, and those that end within
    :data:`~limbo.run.local.HOLD_S` of it, as a forked worker groups its records (one Ray object
    per episode would cost a CPU-bound worker more than its episodes). A task that failed
    raises, after the group it ended in."""
    pending: set[asyncio.Task[tuple[Cell, EpisodeRecord]]] = set(tasks)
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
