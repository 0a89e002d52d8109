"""Running a grid on a Ray cluster: ``limbo run GRID --executor ray [--ray-address ADDR]``.

Ray does the cluster's work — placing tasks on nodes, starting worker processes, noticing a
lost node and running its tasks again elsewhere; this module only feeds it. The driver (the
``limbo run`` process) cuts the cells to run into batches, keeps about two batches per CPU of
the cluster submitted as Ray tasks (:func:`limbo.ray_tasks.remote_batch`), and writes the
records of each batch that comes back through the run's one emit path — the same as forked
workers' (:class:`limbo.executor.Pool`). So the driver stays the only writer of the run
directory: its lock, shards, resume and quarantine are untouched by where episodes ran.

Exactly once: a task that Ray runs again (its node died before its answer arrived) can only
return the cells it already had; the driver keeps the first record of each episode id and
drops any later one. A batch Ray gives up on (:data:`MAX_RETRIES` lost attempts) stops the run
with one line; what finished is recorded and a re-run resumes.

Ray is an optional dependency: the core never imports this module (``limbo.runner`` imports
it only when ``--executor ray`` is chosen) and :func:`require` says in one line how to get it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from limbo import __version__, activity
from limbo.cell import Cell
from limbo.errors import UsageError
from limbo.executor import CHUNK, Emit, RunAborted, chunks
from limbo.ray_tasks import Batch, Setup, remote_batch
from limbo.runtime import stopwatch

RAY_MISSING = "--executor ray needs Ray, an optional extra: pip install 'limbo-bench[ray]'"
MAX_RETRIES = 5
"""Attempts Ray may lose (a node dying under a task) before the run stops."""
PER_SLOT = 2
"""Batches submitted per CPU of the cluster: one running, one waiting behind it."""
NOTE_EVERY_S = 1.0
FORWARD = re.compile(r"^(LIMBO_|OPENAI_|ANTHROPIC_)")
"""Environment variables a worker needs from the driver (besides the models' key variables)."""


def require() -> None:
    """A :class:`UsageError` naming the extra when Ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UsageError(RAY_MISSING) from None


def forwarded() -> dict[str, str]:
    """The driver's variables every worker gets: limbo's own (cache, prices), the providers'
    and the key variables the grid's models read (:func:`limbo.providers.secrets.watched`)."""
    from limbo.providers.secrets import watched

    keys = set(watched())
    return {k: v for k, v in os.environ.items() if FORWARD.match(k) or k in keys}


@contextlib.contextmanager
def connected(address: str | None) -> Iterator[None]:
    """Connect this process to the cluster at ``address`` (``None``: ``$RAY_ADDRESS``, else a
    cluster started on this machine, else a new one-machine cluster) for the block inside."""
    import ray

    if ray.is_initialized():
        yield
        return
    _probe(address)
    try:
        ray.init(address=address, namespace="limbo", log_to_driver=False,
                 logging_level=logging.ERROR, runtime_env={"env_vars": forwarded()})
    except Exception as exc:  # noqa: BLE001 - whatever Ray says, it is one line to the user
        raise UsageError(f"--executor ray: cannot connect to the Ray cluster"
                         f"{f' at {address}' if address else ''}: {_first_line(exc)}") from None
    try:
        yield
    finally:
        ray.shutdown()


def _probe(address: str | None) -> None:
    """A ``HOST:PORT`` nothing listens on is one line at once (Ray would retry for a minute)."""
    if address is None or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--ray-address {address!r} must look like HOST:PORT (the head node's "
                         f"GCS address, e.g. 10.0.0.1:6379), 'auto' or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as exc:
        raise UsageError(f"--ray-address {address}: no Ray head node answers there "
                         f"({exc.strerror or exc}); start one with `ray start --head`") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class RayPool:
    """The cells of one pass, as Ray tasks of :func:`batch_size` cells each."""

    def __init__(self, concurrency: int, timeout: float | None, plugins: list[str],
                 total: int) -> None:
        import ray

        self.ray = ray
        self.setup = _setup(concurrency, timeout, plugins)
        self.total = total
        self.task = ray.remote(remote_batch).options(num_cpus=1, max_retries=MAX_RETRIES,
                                                     retry_exceptions=False)
        self.out: dict[Any, int] = {}
        """Submitted tasks' results -> their number of cells."""
        self.seen: set[str] = set()
        self.view = _View(ray)

    def run(self, cells: Iterator[Cell], emit: Emit) -> None:
        node = self.ray.get_runtime_context().get_node_id()
        from limbo.ray_limiter import limiter_actor

        limiter = limiter_actor(node)
        self.setup = replace(self.setup, limiter=limiter)
        self.view.limiter = limiter
        batches = chunks(cells, batch_size(self.setup.concurrency, self.total,
                                           self.view.slots()))
        try:
            self._fill(batches)
            while self.out:
                done, _ = self.ray.wait(list(self.out), num_returns=1, timeout=NOTE_EVERY_S)
                for ref in done:
                    self._take(ref, self.out.pop(ref), emit)
                self._fill(batches)
                self._say()
        finally:
            activity.say("ray", None)
            for ref in self.out:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)
            with contextlib.suppress(Exception):
                self.ray.kill(limiter)

    def _fill(self, batches: Iterator[list[Cell]]) -> None:
        while len(self.out) < PER_SLOT * self.view.slots():
            batch = next(batches, None)
            if batch is None:
                return
            self.out[self.task.remote(batch, self.setup)] = len(batch)

    def _take(self, ref: Any, cells: int, emit: Emit) -> None:
        try:
            batch: Batch = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            raise RunAborted(f"a batch of {cells} cells was lost on the Ray cluster after "
                             f"{MAX_RETRIES} retries ({type(exc).__name__}); the episodes that "
                             f"finished are recorded, re-run to resume") from None
        if batch.version != __version__:
            raise UsageError(f"node {batch.node[:12]} runs limbo {batch.version}, this driver "
                             f"limbo {__version__}: install the same limbo-bench on every node")
        self._say()
        for episode_id, line, cell, outcome in batch.items:
            if episode_id not in self.seen:  # a retried task's second answer: already written
                self.seen.add(episode_id)
                emit(line, cell, outcome)
        if batch.usage is not None:
            raise UsageError(batch.usage)
        if batch.crash is not None:
            raise RuntimeError(f"a Ray task failed on node {batch.node[:12]}:\n{batch.crash}")

    def _say(self) -> None:
        activity.say("ray", self.view.note(sum(self.out.values())))


def batch_size(concurrency: int, total: int, slots: int) -> int:
    """Cells per task: enough for ``concurrency`` episodes at once, twice over (so a batch's
    last slow episode leaves little idle), and small enough that every slot gets work."""
    size = max(CHUNK, 2 * concurrency)
    return max(1, min(size, -(-total // (PER_SLOT * max(slots, 1)))))


def _setup(concurrency: int, timeout: float | None, plugins: list[str]) -> Setup:
    import ray

    from limbo.providers import cache
    from limbo.providers.secrets import watched

    found = cache.default_cache()
    return Setup(run=ray.get_runtime_context().get_job_id(), concurrency=concurrency,
                 timeout=timeout, plugins=tuple(_absolute(p) for p in plugins),
                 cache_root=str(found.root) if found is not None else None,
                 watched=tuple(watched()))


def _absolute(plugin: str) -> str:
    """A plugin file by its absolute path (a worker's directory is not the driver's)."""
    path = Path(plugin)
    if plugin.endswith(".py") or os.sep in plugin or path.exists():
        return str(path.resolve())
    return plugin


class _View:
    """The cluster as the progress line shows it: live nodes, CPUs, the shared limiter's
    calls. Asked of Ray at most every :data:`NOTE_EVERY_S`."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.at = -NOTE_EVERY_S
        self.nodes, self.cpus = 0, 1
        self.limiter: Any = None
        self.asked: Any = None
        self.calls = (0, 0)

    def _refresh(self) -> None:
        if stopwatch() - self.at < NOTE_EVERY_S:
            return
        self.at = stopwatch()
        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        self.nodes = len(alive)
        self.cpus = max(1, int(sum(n.get("Resources", {}).get("CPU", 0) for n in alive)))
        if self.limiter is None:
            return
        if self.asked is not None and self.ray.wait([self.asked], timeout=0)[0]:
            with contextlib.suppress(Exception):  # the actor is gone: the note says nothing
                self.calls = tuple(self.ray.get(self.asked))
            self.asked = None
        if self.asked is None:
            self.asked = self.limiter.snapshot.remote()

    def slots(self) -> int:
        self._refresh()
        return self.cpus

    def note(self, in_flight: int) -> str:
        self._refresh()
        calls = (f"  model calls {self.calls[0]} in flight / limit {self.calls[1]} (shared)"
                 if self.calls[1] else "")
        return (f"ray {self.nodes} node{'s' if self.nodes != 1 else ''}, {in_flight} cells in "
                f"flight{calls}")
