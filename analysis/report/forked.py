"""The parts of a report this process need not make itself — packing the episode buckets,
drawing the figures — done in forked worker processes, each started with what it needs already
in memory (nothing is sent to it but a range of buckets or a figure's number) and sending back
finished bytes.

Bucket workers are forked once the runs are loaded, one per core but this one's, and pack
while this process builds the tables. Figure workers are forked once the tables a figure draws
from are built, so that they start with the selections and rates the tables computed (a figure
drawn before them computes Table 0 again, a third more CPU): Figure 0's as soon as Table 0 is
built, the paper's figures' once Tables 3-13 are. Figure 0, half the figures' CPU on the
paper grid, then draws while the other tables are built instead of after them, which keeps it
off the build's critical path. At the paper's scale on two cores this runs the build's three
parts — tables, buckets, figures — side by side. Where ``fork`` is not available, or ``workers`` is 0 (``limbo view``, whose rebuilds run
beside its server's threads), everything runs here instead.

A worker that dies (killed, out of memory) loses nothing: what it had not sent back is done
here.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from collections.abc import Collection, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from limbo.analysis.data import Data


class Pages(Protocol):
    """What the workers read of the report's site (:class:`~limbo.analysis.report.site.Site`,
    which imports this module): how many episode buckets it has, and each bucket's bytes."""

    buckets: int

    def bucket(self, number: int) -> bytes | None: ...


CHUNK = 32
"""Buckets per task: a few hundred episodes, so the workers share the tail evenly."""


@dataclass
class _Job:
    site: Pages
    drawn: Data


_JOB: _Job | None = None
"""What the workers read: set before they are forked, inherited by each."""


def workers() -> int:
    """How many workers a build forks: one per core this process may use, at most four; none
    where this platform cannot fork."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(cores or 1, 4)


def _figure(number: int) -> tuple[dict[str, bytes], str]:
    from limbo.analysis.figures import render

    assert _JOB is not None
    return render(_JOB.drawn, number)


def _buckets(start: int, stop: int) -> list[bytes]:
    assert _JOB is not None
    return [_JOB.site.bucket(n) or b"" for n in range(start, stop)]


class Workers:
    """The workers of one build, and what was handed to them."""

    def __init__(self, site: Pages, drawn: Data, count: int) -> None:
        global _JOB
        self.site, self.drawn, self.count = site, drawn, count
        self._pools: list[ProcessPoolExecutor] = []
        self._figures: dict[int, Future[tuple[dict[str, bytes], str]]] = {}
        self._buckets: dict[int, Future[list[bytes]]] = {}
        if count <= 0:
            return
        _JOB = _Job(site, drawn)
        pool = self._pool(max(1, count - 1))
        self._buckets = {start: pool.submit(_buckets, start, min(start + CHUNK, site.buckets))
                         for start in range(0, site.buckets, CHUNK)}

    def _pool(self, count: int) -> ProcessPoolExecutor:
        """A pool whose workers are forked now (at its first task), as this process is. The
        objects this process holds are moved out of the garbage collector's reach first, so
        that a collection in a worker does not write to (and so copy) every page it inherited."""
        gc.freeze()
        pool = ProcessPoolExecutor(count, multiprocessing.get_context("fork"))
        self._pools.append(pool)
        return pool

    def draw(self, numbers: Collection[int]) -> None:
        """Hand figures ``numbers`` to workers forked now (call once the tables they draw
        from are built)."""
        if self.count > 0 and numbers:
            pool = self._pool(min(self.count, len(numbers)))
            self._figures.update((n, pool.submit(_figure, n)) for n in numbers)

    def figure(self, number: int) -> tuple[dict[str, bytes], str]:
        """Figure ``number``'s files and why it was not drawn (see
        :func:`limbo.analysis.figures.render`)."""
        found = self._result(self._figures.get(number))
        if found is None:
            from limbo.analysis.figures import render

            return render(self.drawn, number)
        drawn: tuple[dict[str, bytes], str] = found
        return drawn

    def buckets(self) -> Iterator[tuple[int, bytes]]:
        """Every bucket's script, by number, as the workers finish them."""
        for start in range(0, self.site.buckets, CHUNK):
            found = self._result(self._buckets.get(start))
            numbers = range(start, min(start + CHUNK, self.site.buckets))
            yield from zip(numbers, found if found is not None
                           else (self.site.bucket(n) or b"" for n in numbers), strict=True)

    def _result(self, future: Future[Any] | None) -> Any:
        if future is None:
            return None
        try:
            return future.result()
        except BrokenProcessPool:  # a worker died: the task is done here
            return None

    def close(self) -> None:
        global _JOB
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        if self._pools:
            gc.unfreeze()
        _JOB = None


@contextlib.contextmanager
def forked(site: Pages, drawn: Data, count: int) -> Iterator[Workers]:
    """Workers for ``site`` (none when ``count`` is 0), shut down on the way out."""
    pool = Workers(site, drawn, count)
    try:
        yield pool
    finally:
        pool.close()
