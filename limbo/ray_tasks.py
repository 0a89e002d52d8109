"""The worker side of a Ray run: one Ray task runs one batch of cells and returns its records.

A task never writes anything: it returns each record as its encoded line (plus the cell and
outcome the driver's summary needs), and the driver alone appends them to the run directory,
exactly as forked workers send theirs over a pipe (:mod:`limbo.executor`). So a task that Ray
runs again — its node died — costs time, never a record: the driver keeps the first result of
each cell and ignores any other.

A Ray worker process runs many batches. It keeps one event loop, on a thread of its own, and
one pool of provider clients on it (:func:`limbo.providers.clients.bound`), so batches share
clients and connections as the episodes of a local run do; the pool lives as long as the
process. Its provider calls go through the run's one :class:`~limbo.ray_limiter.RayLimiter`.
"""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from limbo import __version__
from limbo.cell import Cell
from limbo.errors import UsageError
from limbo.executor import encoded, stream
from limbo.providers.clients import ClientPool

T = TypeVar("T")
Item = tuple[str, bytes, dict[str, Any], dict[str, Any]]
"""A record: its episode id, its line, its cell and outcome."""


@dataclass(frozen=True)
class Setup:
    """What every task of a run needs besides its cells; applied once per worker process."""

    run: str
    """The driver's Ray job id: a new run, a new setup."""
    concurrency: int
    timeout: float | None
    plugins: tuple[str, ...] = ()
    cache_root: str | None = None
    watched: tuple[str, ...] = ()
    """Environment variables the driver's adapters read keys from: secrets to scrub here too."""
    limiter: Any = None
    """The run's :class:`~limbo.ray_limiter.LimiterActor` handle."""


@dataclass
class Batch:
    """A task's answer: the records of its cells, in the order they ended, and where it ran."""

    node: str
    version: str
    items: list[Item] = field(default_factory=list)
    usage: str | None = None
    """A :class:`UsageError` that stopped the batch (a rejected key): the run stops."""
    crash: str | None = None
    """The traceback of a bug that stopped the batch."""


class _Loop:
    """This process's event loop, on its own thread, and the client pool of its episodes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = ClientPool()
        threading.Thread(target=self.loop.run_forever, name="limbo-episodes", daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


_state: dict[str, Any] = {"loop": None, "run": None, "plugins": set()}


def _prepare(setup: Setup, node: str) -> _Loop:
    """Make this process ready for ``setup``'s run (once per run)."""
    if _state["run"] != setup.run:
        from limbo.providers import cache, limiter, secrets
        from limbo.ray_limiter import RayLimiter
        from limbo.registry import load_plugin

        for plugin in setup.plugins:
            if plugin not in _state["plugins"]:
                load_plugin(plugin)
                _state["plugins"].add(plugin)
        cache.configure(setup.cache_root)
        for var in setup.watched:
            secrets.watch(var)
        actor = setup.limiter
        if actor is not None:
            limiter.set_limiter_factory(lambda key: RayLimiter(key, actor, node))
        _state["run"] = setup.run
    if _state["loop"] is None:
        _state["loop"] = _Loop()
    loop: _Loop = _state["loop"]
    return loop


def remote_batch(cells: list[Cell], setup: Setup) -> Batch:
    """The body of the run's Ray task: :func:`run_batch` on the node it landed on."""
    import ray

    return run_batch(cells, setup, ray.get_runtime_context().get_node_id())


def run_batch(cells: list[Cell], setup: Setup, node: str) -> Batch:
    """Run ``cells`` at ``setup.concurrency`` episodes at a time; never raises."""
    batch = Batch(node=node, version=__version__)
    done: list[tuple[Cell, dict[str, Any]]] = []
    try:
        loop = _prepare(setup, node)
        loop.run(stream(iter(cells), setup.concurrency, setup.timeout,
                        lambda cell, record: done.append((cell, record)), pool=loop.pool))
    except UsageError as exc:
        batch.usage = str(exc)
    except Exception:  # noqa: BLE001 - a bug: its traceback goes to the driver, the run stops
        batch.crash = traceback.format_exc()
    from limbo.providers.secrets import scrubber

    scrub = scrubber()  # after the episodes: their adapters have named the keys they read
    batch.items = [(cell.episode_id, encoded(record, cell, scrub), record["cell"],
                    record["outcome"])
                   for cell, record in done]
    return batch
