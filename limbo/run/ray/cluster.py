"""Running a grid on a Ray cluster: ``limbo run GRID --executor ray [--ray-address ADDR]``.

Ray does the cluster's work — placing workers on nodes by their CPUs, starting their
processes, noticing a lost node; this module only feeds it. On connecting, the driver (the
``limbo run`` process) asks Ray for one :class:`~limbo.run.ray.worker.EpisodeWorker` actor per CPU
of the cluster, which start while the run is planned. It then cuts the cells to run into
batches, keeps :data:`PER_SLOT` batches in each worker, and writes the records each batch
streams back as its episodes end through the run's one emit path — the same as forked
workers' (:class:`limbo.run.local.Pool`). So the driver stays the only writer of the run
directory: its lock, shards, resume and quarantine are untouched by where episodes ran.

A lost node: Ray reports its workers dead (``RayActorError``), and the answers they had
finished but the driver had not fetched lost with the node's object store
(``ObjectLostError``); the cells of those batches whose records the driver has not written go
back in the queue and run on the workers left, and a worker is added for every CPU the cluster
gains (a replacement node). Exactly once: the driver keeps the first record of each episode id
and drops any later one, so a cell that runs twice is written once. A batch lost
:data:`MAX_RETRIES` times, or a cluster with no worker left, stops the run with one line; what
finished is recorded and a re-run resumes.

Connecting, and the workers and limiter the runs of one command share, are
:mod:`limbo.run.ray.session`'s; Ray is an optional dependency, imported only when ``--executor
ray`` is chosen.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.run import activity
from limbo.run.local import CHUNK, Emit, RunAborted
from limbo.run.ray.session import (
    NOTE_EVERY_S,
    ClusterView,
    forwarded,
    new_worker,
    shared,
    worker_names,
    workers,
)
from limbo.run.ray.worker import CellBatch, Setup
from limbo.sim.cell import Cell

if TYPE_CHECKING:
    from limbo.run.budget import Budget
    from limbo.run.context import Settings

MAX_RETRIES = 5
"""Times a batch may be lost with its worker (its node dying) before the run stops."""
PER_SLOT = 2
"""Batches in each worker at once: one running, the next one's cells waiting behind it."""


class RayPool:
    """The cells of one pass, in batches of :func:`batch_size` cells, on the cluster's workers."""

    def __init__(self, settings: Settings, total: int, budget: Budget | None = None) -> None:
        import ray

        self.ray = ray
        self.setup = _setup(settings, budget)
        self.concurrency = settings.concurrency
        self.total = total
        self.refused = False
        """The budget refused a cell: no more are handed out."""
        self.workers = workers
        self.out: dict[Any, tuple[Any, list[Cell], int, set[str]]] = {}
        """Each batch out: its answers (a streaming generator) -> (its worker, its cells,
        attempts so far, the episode ids answered so far)."""
        self.load: dict[Any, tuple[int, int]] = {}
        """Each worker's batches and cells out."""
        self.answered: set[Any] = set()
        self.again: list[tuple[list[Cell], int]] = []
        """Batches whose worker was lost, to run again."""
        self.seen: set[str] = set()
        self.held = 0
        """Cells each worker is kept holding (:func:`held`)."""
        self.sent = 0
        """Cells handed out for the first time (not counting those run again)."""
        self.view = ClusterView(ray)

    def run(self, cells: Iterator[Cell], emit: Emit) -> None:
        limiter = shared["limiter"]
        self.view.limiter = limiter
        setup = self.ray.put(replace(self.setup, limiter=limiter))
        size = batch_size(self.concurrency, self.total, self.view.slots())
        self.held = held(self.concurrency, size)
        batches = guided(cells, size, self.total, self.view)
        try:
            self._grow()
            self._fill(batches, setup)
            while self.out:
                done, _ = self.ray.wait(list(self.out), num_returns=1, timeout=NOTE_EVERY_S)
                for ref in done:
                    self._take(ref, emit)
                self._grow()
                self._fill(batches, setup)
                self._say()
            if not self.refused and (self.again or next(batches, None) is not None):
                raise RunAborted("no worker is left on the Ray cluster; the episodes that "
                                 "finished are recorded, re-run to resume")
        finally:
            activity.say("ray", None)

    def _grow(self) -> None:
        """A worker for every CPU of the cluster not yet served and free (a node added or
        replaced; a CPU still held by a dead node's worker is not free). A worker that has not
        answered yet may not hold its CPU yet: it counts as holding one, so that no worker is
        made that could wait for a CPU forever."""
        unplaced = sum(1 for w in self.workers if w not in self.answered)
        for _ in range(min(self.view.slots() - len(self.workers), self.view.free - unplaced)):
            self.workers.append(new_worker(self.ray))
            self.view.free -= 1
        for worker in self.workers:
            self.load.setdefault(worker, (0, 0))

    def _fill(self, batches: Iterator[list[Cell]], setup: Any) -> None:
        """Each worker gets :data:`PER_SLOT` batches, and more while it holds fewer than
        :func:`held` cells: a worker holding only what it runs at once would leave a slot idle
        from the end of its episode until the driver hears of it and sends the next cell."""
        for worker in self.workers:
            while not self.refused and (self.load[worker][0] < PER_SLOT
                                        or self.load[worker][1] < self._keep()):
                cells, tries = self.again.pop() if self.again else (next(batches, None), 0)
                if cells is None:
                    return
                self.sent += len(cells) if not tries else 0
                answers = worker.run_batch.options(num_returns="streaming").remote(cells, setup)
                self.out[answers] = (worker, cells, tries, set())
                self._count(worker, 1, len(cells))

    def _keep(self) -> int:
        """Cells a worker is kept holding: :func:`held`, until what is left to hand out would
        fit the workers' slots; from then on only what it can run at once, so that the last
        cells wait for whichever worker frees a slot first instead of queueing behind one
        worker's running episodes while another's slots are idle (a whole episode more of wall
        time at the end of a model run)."""
        if self.total - self.sent <= self.concurrency * len(self.workers):
            return self.concurrency
        return self.held

    def _count(self, worker: Any, batches: int, cells: int) -> None:
        held = self.load[worker]
        self.load[worker] = (held[0] + batches, held[1] + cells)

    def _take(self, answers: Any, emit: Emit) -> None:
        """The next answer of a batch: records to write, or its end."""
        worker, cells, tries, got = self.out[answers]
        lost = self.ray.exceptions
        try:
            batch: CellBatch = self.ray.get(next(answers))
        except StopIteration:
            self._end(answers, len(cells) - len(got))
            return
        except (lost.RayActorError, lost.ObjectLostError, lost.NodeDiedError):
            # its worker died, or an answer did, in the dead node's object store
            self._end(answers, len(cells) - len(got))
            self._lost(worker, [c for c in cells if c.episode_id not in got], tries)
            return
        except self.ray.exceptions.RayError as exc:
            raise RunAborted(f"a batch of {len(cells)} cells failed on the Ray cluster "
                             f"({type(exc).__name__}); the episodes that finished are recorded, "
                             f"re-run to resume") from None
        self.answered.add(worker)
        got.update(item[0] for item in batch.items)
        self._count(worker, 0, -len(batch.items))  # refused cells: at the batch's end
        self.refused = self.refused or batch.refused > 0
        self._write(batch, emit)

    def _end(self, answers: Any, unanswered: int) -> None:
        worker = self.out.pop(answers)[0]
        self._count(worker, -1, -unanswered)

    def _lost(self, worker: Any, cells: list[Cell], tries: int) -> None:
        """``worker`` died (its node, most likely): forget it — the limiter takes back the
        call slots it held — and run again the cells of its batch that were not answered."""
        if worker in self.workers:
            self.workers.remove(worker)
            self.view.at = -NOTE_EVERY_S  # ask Ray again how many nodes and CPUs are left
            with contextlib.suppress(Exception):  # dead already, most likely
                self.ray.kill(worker)
            self.view.limiter.forget.remote(worker_names.pop(worker, ""))
        if not cells:  # every record of the batch came in before its worker was lost
            return
        if tries + 1 >= MAX_RETRIES:
            raise RunAborted(f"a batch of {len(cells)} cells was lost with its Ray worker "
                             f"{MAX_RETRIES} times; the episodes that finished are recorded, "
                             f"re-run to resume")
        self.again.append((cells, tries + 1))
        self.view.rerun += 1

    def _write(self, batch: CellBatch, emit: Emit) -> None:
        if batch.version != __version__:
            raise UsageError(f"node {batch.node[:12]} runs limbo {batch.version}, this driver "
                             f"limbo {__version__}: install the same limbo-bench on every node")
        self._say()
        for episode_id, line, cell, outcome in batch.items:
            if episode_id not in self.seen:  # a batch run twice: its records are written once
                self.seen.add(episode_id)
                emit(line, cell, outcome)
        if batch.usage is not None:
            raise UsageError(batch.usage)
        if batch.crash is not None:
            raise RuntimeError(f"a Ray worker failed on node {batch.node[:12]}:\n{batch.crash}")

    def _say(self) -> None:
        cells = sum(len(c) - len(got) for _, c, _, got in self.out.values())
        activity.say("ray", self.view.note(cells))


_runs = itertools.count()
BATCH = 4 * CHUNK
"""Cells per batch of a run of one episode at a time (reference policies, about a millisecond
each). A batch's round trip through Ray — its last answer to the driver, the next batch back
to the worker — takes tens of milliseconds on a busy machine: with two batches of 32 cells a
worker sat idle half the time (850 against 1,860 episodes/s at 128, 11,550 episodes, two
one-CPU nodes). Answers still stream back as episodes end, so a bigger batch delays no
record."""


def batch_size(concurrency: int, total: int, slots: int) -> int:
    """Cells per batch: enough for ``concurrency`` episodes at once (the next batch's cells
    wait in the worker behind them), and small enough that every worker gets work."""
    size = BATCH if concurrency <= 1 else max(CHUNK // 4, concurrency // 4)
    return max(1, min(size, -(-total // (PER_SLOT * max(slots, 1)))))


def held(concurrency: int, size: int) -> int:
    """Cells a worker is kept holding (besides its :data:`PER_SLOT` batches): as many as it
    runs at once and one batch more, waiting for the first slots that free up."""
    return concurrency + size if concurrency > 1 else 0


def guided(cells: Iterator[Cell], size: int, total: int, view: ClusterView) -> Iterator[list[Cell]]:
    """Batches of ``size`` cells, smaller towards the end: at most an equal share of what is
    left for each batch a worker holds. A worker's queued batch cannot move to another, so the
    last ones are small and every worker ends at about the same time."""
    left = total
    while True:
        share = -(-left // (PER_SLOT * max(view.slots(), 1)))
        batch = list(itertools.islice(cells, max(1, min(size, share))))
        if not batch:
            return
        left -= len(batch)
        yield batch


def _setup(settings: Settings, budget: Budget | None) -> Setup:
    """The driver's context as each worker gets it: files by absolute path (a worker's
    directory is not the driver's), the variables its episodes read keys from."""
    import ray

    from limbo.base.secrets import watched

    settings = replace(settings, plugins=tuple(_absolute(p) for p in settings.plugins),
                       worlds=tuple(str(Path(w).resolve()) for w in settings.worlds))
    return Setup(run=f"{ray.get_runtime_context().get_job_id()}/{next(_runs)}",
                 settings=settings, watched=tuple(watched()),
                 env=tuple(sorted(forwarded().items())), budget=budget)


def _absolute(plugin: str) -> str:
    """A plugin file by its absolute path (a worker's directory is not the driver's)."""
    path = Path(plugin)
    if plugin.endswith(".py") or os.sep in plugin or path.exists():
        return str(path.resolve())
    return plugin


