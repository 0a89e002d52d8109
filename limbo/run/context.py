"""What a run is given, fixed before it starts: one frozen :class:`RunContext`, and the
:class:`Executor` protocol every way of running episodes implements.

``limbo run`` reads the user's configuration once, at the command's edge — flags, the cache
directory, price files, plugins, worlds — builds one executor for the command and one
context per grid, and hands both down. Nothing below reads a setting from ``os.environ`` or
from a global a command set, and nothing changes the context once the run has started: a
worker process gets it as an argument (forked workers) or inside its batch's setup (Ray).

An executor owns where episodes run and what its processes share: the call limiter (one per
command, so a provider's limit learned by one grid holds for the next) and, for each pass of a
run under ``--max-cost``, the one :class:`~limbo.run.budget.Budget` every process asks before
starting an episode. Three implement it: :class:`~limbo.run.local.InProcess` (this process,
``--concurrency`` episodes at once), :class:`~limbo.run.forked.Forked` (``--workers N`` forked
processes) and :class:`~limbo.run.ray.executor.RayExecutor` (a Ray cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from limbo.providers.options import ProviderOptions
from limbo.run.breaker import STREAK
from limbo.sim.config import EPISODE_TIMEOUT_S

if TYPE_CHECKING:
    from limbo.run.budget import Budget
    from limbo.sim.cell import Cell

Item = tuple[bytes, Mapping[str, Any], Mapping[str, Any]]
"""A finished episode on its way to the writer: its record's line, and what the summary tallies
of its cell and outcome (:func:`limbo.run.summary.tallied`)."""


@dataclass(frozen=True)
class Settings:
    """What every process that runs episodes needs besides its cells, read once by the
    command: forked workers inherit them, a Ray worker applies them as a run starts
    (:class:`limbo.run.ray.worker.EpisodeWorker`); the provider options are bound around the
    episodes, wherever they run (:func:`limbo.run.local.stream`)."""

    concurrency: int = 1
    """Episodes in flight at once in each process."""
    episode_timeout: float | None = EPISODE_TIMEOUT_S
    plugins: tuple[str, ...] = ()
    """Plugin modules or files (absolute paths), loaded by every worker."""
    worlds: tuple[str, ...] = ()
    """World files (absolute paths) the cells run in."""
    providers: ProviderOptions = ProviderOptions()
    """The response cache and price files (absolute paths), bound by each executor around its
    episodes (:func:`limbo.providers.options.using`)."""


@dataclass(frozen=True)
class RunContext:
    """One grid's run: where its records go (the store), which of its cells, how, with what
    budget, on which executor. Frozen: a pass that caps ``workers`` at the cells left makes a
    new one (:func:`dataclasses.replace`)."""

    out: Path
    """The run directory (:mod:`limbo.log.store`)."""
    settings: Settings = field(default_factory=Settings)
    workers: int = 1
    """Processes for :class:`~limbo.run.forked.Forked` (``--workers``)."""
    limit: int | None = None
    shard: tuple[int, int] | None = None
    max_cost: float | None = None
    """The pass's budget in USD (``--max-cost``); the executor makes the shared
    :class:`~limbo.run.budget.Budget` that enforces it."""
    retry: tuple[str, ...] = ()
    """Terminations whose cells run again (``--retry-errors``)."""
    only: frozenset[str] | None = None
    """Run only these cells of the grid (a pilot, :mod:`limbo.run.forecast`); ``None``: all."""
    error_streak: int = STREAK
    """Episodes in a row ended in ``model_error`` with one cause that stop the pass
    (``--error-streak``; 0: never), :mod:`limbo.run.breaker`."""
    executor: Executor | None = None
    """``None``: :func:`limbo.run.local.local_executor` of ``workers``."""


class Sink(Protocol):
    """Where an executor hands finished episodes: the run's one writer and tally."""

    total: int
    """Cells of the pass."""
    scrub: Callable[[str], str]
    keep_fds: list[int]
    """The run's lock and records file: a forked worker closes them."""

    def emit(self, line: bytes, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        """One record, encoded."""

    def emit_group(self, items: list[Item]) -> None:
        """A group of records, written with one write."""

    def halted(self) -> bool:
        """Whether the pass stops starting episodes (:mod:`limbo.run.breaker`): the cells
        handed out no longer run."""


class Executor(Protocol):
    """A way of running a pass's episodes: in this process, in forked workers, on Ray."""

    def budget(self, max_cost: float) -> Budget:
        """A new budget that every process of this executor's next pass shares."""

    def run(self, cells: Iterator[Cell], ctx: RunContext, budget: Budget | None,
            sink: Sink) -> None:
        """Run ``cells``, handing each record to ``sink`` as its episode ends; start an
        episode only when ``budget`` (if any) admits it."""

    def limits(self) -> dict[str, dict[str, int]] | None:
        """The shared call limiter's state per key (limit, calls, refused), for the manifest;
        ``None`` for a limiter of this process alone."""

    def close(self) -> None:
        """Stop what the executor shares between passes (a limiter host)."""
