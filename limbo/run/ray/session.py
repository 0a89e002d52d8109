"""One Ray session per command: connecting to the cluster, its workers and their shared limiter.

``limbo run --executor ray`` connects once (:func:`connected`) and the runs of the command share
what the connection starts: one :class:`~limbo.run.ray.worker.EpisodeWorker` actor per CPU of the
cluster, asked for at once so that they start while the run is planned, and one limiter actor
(:mod:`limbo.run.ray.leases`). The workers import the SDKs the grids' models need while they
wait (:data:`PRELOAD`). :class:`ClusterView` is the cluster as the progress line shows it. The
runs themselves — batches, lost nodes, exactly-once writing — are :mod:`limbo.run.ray.cluster`'s.

Ray is an optional dependency: the core never imports this module (``limbo.run.runner`` imports
the Ray executor only when ``--executor ray`` is chosen) and :func:`require` says in one line
how to get it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.runtime import stopwatch
from limbo.run.ray.worker import EpisodeWorker

RAY_MISSING = "--executor ray needs Ray, an optional extra: pip install 'limbo-bench[ray]'"
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
    and the key variables the grid's models read (:func:`limbo.base.secrets.watched`)."""
    from limbo.base.secrets import watched

    keys = set(watched())
    return {k: v for k, v in os.environ.items() if FORWARD.match(k) or k in keys}


@contextlib.contextmanager
def connected(address: str | None, models: Sequence[str] = ()) -> Iterator[None]:
    """Connect this process to the cluster at ``address`` (``None``: ``$RAY_ADDRESS``, else a
    cluster started on this machine, else a new one-machine cluster) for the block inside;
    the workers started import the SDKs of ``models`` (:func:`sdks`) in their constructor."""
    import ray

    if ray.is_initialized():
        yield
        return
    _probe(address)
    try:
        ray.init(address=address, namespace="limbo", log_to_driver=False,
                 logging_level=logging.ERROR)
    except Exception as exc:  # noqa: BLE001 - whatever Ray says, it is one line to the user
        raise UsageError(f"--executor ray: cannot connect to the Ray cluster"
                         f"{f' at {address}' if address else ''}: {_first_line(exc)}") from None
    try:
        _start(ray, sdks(models))
        yield
    finally:
        workers.clear()
        _preload.clear()
        worker_names.clear()
        shared.clear()
        ray.shutdown()


def _start(ray: Any, preload: tuple[str, ...]) -> None:
    """The session's limiter, then one worker per CPU: asked for at once, so that their
    processes start while the driver checks the grid and plans the run. The limiter first:
    every episode's first model call waits for it, and a node may start its worker processes
    one after another (Ray starts as many at once as the node has CPUs, unless
    ``RAY_worker_maximum_startup_concurrency`` says more: docs/scale.md). No
    runtime environment: Ray would start new processes for it instead of taking the ones it
    keeps ready (the driver's variables go with each run's :class:`Setup` instead)."""
    from limbo.run.ray.leases import limiter_actor

    shared["limiter"] = limiter_actor(ray.get_runtime_context().get_node_id())
    _preload[:] = preload
    workers[:] = [new_worker(ray) for _ in range(ClusterView(ray).slots())]


def sdks(models: Sequence[str]) -> tuple[str, ...]:
    """The SDKs (of :data:`PRELOAD`) the providers of ``models`` import: known from the
    grids before the driver checks them, so that the workers import them while it does."""
    named = (spec.partition("/")[0] for spec in models)
    return tuple(dict.fromkeys(p for p in named if p in PRELOAD))


def warm() -> None:
    """Have the session's workers import the SDKs the driver's model checks imported and
    :func:`sdks` did not foresee (a plugin's provider, a harness's ``mcp``)."""
    preload = tuple(m for m in PRELOAD if m in sys.modules and m not in _preload)
    for worker in workers if preload else ():
        worker.warm.remote(preload)


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


workers: list[Any] = []
"""The connected session's :class:`~limbo.run.ray.worker.EpisodeWorker` actors (alive or not yet
known dead), shared by the runs of one command."""
shared: dict[str, Any] = {}
"""The connected session's :class:`~limbo.run.leases.SlotKeeper` actor (``"limiter"``), shared by
the runs of one command, as one process's limiters are."""


_preload: list[str] = []
"""The SDKs the session's workers import on starting (:func:`sdks` of the grids' models)."""
worker_names: dict[Any, str] = {}
"""Each worker's name, its lessee for the limiter."""
_named = itertools.count()


def new_worker(ray: Any) -> Any:
    """An :class:`~limbo.run.ray.worker.EpisodeWorker` on one CPU wherever Ray finds one; never
    restarted by Ray (its batches are re-queued by the driver instead)."""
    preload = tuple(dict.fromkeys((*_preload, *(m for m in PRELOAD if m in sys.modules))))
    name = f"worker{next(_named)}"
    worker = ray.remote(EpisodeWorker).options(
        num_cpus=1, max_restarts=0, max_concurrency=MAX_CALLS).remote(name, preload)
    worker_names[worker] = name
    return worker


MAX_CALLS = 1_000
"""Batches a worker takes in at once: they wait on its ``--concurrency`` gate, not on Ray's
call limit (towards the end a worker holds many small batches)."""
PRELOAD = ("openai", "anthropic", "mcp")
"""Packages a worker imports on starting if the driver has (its model checks import the
grid's SDKs): about a second each, better spent while the driver plans than in an episode."""


class ClusterView:
    """The cluster as the progress line shows it: live nodes, CPUs, the shared limiter's
    calls. Asked of Ray at most every :data:`NOTE_EVERY_S`."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray
        self.at = -NOTE_EVERY_S
        self.nodes, self.cpus, self.free = 0, 1, 0
        self.rerun = 0
        """Batches lost with their worker and queued again."""
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
        self.free = int(self.ray.available_resources().get("CPU", 0))
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
        rerun = f", {self.rerun} lost batch{'es' if self.rerun != 1 else ''} run again" \
            if self.rerun else ""
        return (f"ray {self.nodes} node{'s' if self.nodes != 1 else ''}, {in_flight} cells in "
                f"flight{rerun}{calls}")
