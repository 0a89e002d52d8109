"""Running episodes: in this process with asyncio concurrency, or in forked worker processes.

In this process every finished episode is written at once, one write per record, so a kill
loses only the episodes in flight. Only the parent process writes: a worker sends its records
over a pipe in small groups, none held more than 20 ms, and the parent writes each group with
one write, so a kill of the whole run loses the episodes in flight and, with workers, at most
the last 20 ms of finished ones.

In this process, at most ``concurrency`` episodes run at a time (model grids are I/O-bound).
Workers (``--workers N``, for CPU-bound reference-policy grids) each take small chunks of cells
from the parent (the next one waiting in the pipe while they run the current one) and send
back their records.
Workers ignore Ctrl-C: the parent alone handles it, keeps what already arrived, and stops them.
A worker that dies (killed, out of memory) stops the run with one line; what finished is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection, wait
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.runtime import stopwatch
from limbo.episode.run_one import arun_episode, unbuilt_record
from limbo.log.records import EpisodeRecord
from limbo.log.store import encode
from limbo.providers.clients import ClientPool, bound, shared_clients
from limbo.run.summary import tallied
from limbo.sim.cell import Cell

Emit = Callable[[bytes, Mapping[str, Any], Mapping[str, Any]], None]
Item = tuple[bytes, dict[str, Any], dict[str, Any]]
"""A finished episode on its way to the writer: its record's line, and what the summary tallies
of its cell and outcome (:func:`limbo.run.summary.tallied`)."""
EmitGroup = Callable[[list[Item]], None]
CHUNK = 32
GROUP, HOLD_S = 16, 0.02


class RunAborted(UsageError):
    """The run cannot go on (a worker died); what finished is on disk, a re-run resumes."""


def freeze_heap() -> None:
    """Take every object alive now out of the cyclic collector's sight, for good.

    What a process holds when its episodes start (modules, the SDKs, the cells to run) lives
    until it exits, yet each full collection during the run walked all of it: about 0.2 s with
    the SDKs loaded, during which no answer waiting on the event loop is read. Frozen, a
    collection walks only what the episodes made. Forked workers inherit the frozen heap and,
    since a collection no longer writes to it, keep sharing its pages. Called once by each
    ``limbo run`` process and each Ray worker, never by library code: a caller that lives on
    would keep what it frees later in a cycle."""
    gc.freeze()


def encoded(record: EpisodeRecord, cell: Cell, scrub: Callable[[str], str]) -> bytes:
    """The record's line; a record that cannot be written as strict JSON becomes an
    ``infra_error`` record of its cell saying why, so the grid goes on and the cell is counted."""
    try:
        return encode(record, scrub)
    except ValueError as exc:
        return encode(unbuilt_record(cell, f"the record could not be written: {exc}"), scrub)


# ------------------------------------------------------------------ in this process


async def stream(cells: Iterator[Cell], concurrency: int, timeout: float | None,
                 sink: Callable[[Cell, EpisodeRecord], None],
                 may_start: Callable[[int], bool] = lambda running: True,
                 pool: ClientPool | None = None) -> None:
    """Run ``cells`` with at most ``concurrency`` in flight, handing each record to ``sink`` as
    its episode ends. ``may_start(running)`` is asked before each start (the budget). The
    episodes share provider clients: ``pool``'s, left open, or a pool of their own, closed when
    the last one ends."""
    if pool is not None:
        with bound(pool):
            await _stream(cells, concurrency, timeout, sink, may_start)
        return
    async with shared_clients():
        await _stream(cells, concurrency, timeout, sink, may_start)


async def _stream(cells: Iterator[Cell], concurrency: int, timeout: float | None,
                  sink: Callable[[Cell, EpisodeRecord], None],
                  may_start: Callable[[int], bool]) -> None:
    if concurrency <= 1:
        for cell in cells:
            if not may_start(0):
                return
            sink(cell, await arun_episode(cell, timeout=timeout))
        return
    running: set[asyncio.Task[None]] = set()

    async def one(cell: Cell) -> None:
        sink(cell, await arun_episode(cell, timeout=timeout))

    try:
        for cell in cells:
            while len(running) >= concurrency:
                running = await _reap(running)
            if not may_start(len(running)):
                break
            running.add(asyncio.ensure_future(one(cell)))
        while running:
            running = await _reap(running)
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)


async def _reap(running: set[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
    done, pending = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        task.result()  # a UsageError (a rejected API key) or a failed write stops the run
    return pending


# ------------------------------------------------------------------ worker processes


def chunks(cells: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    chunk: list[Cell] = []
    for cell in cells:
        chunk.append(cell)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Outbox:
    """Records on their way from a worker to the parent: sent in groups of at most
    :data:`GROUP`, none held longer than :data:`HOLD_S`. One message per record would wake
    the parent for every episode, and those context switches cost the workers about 7% of a
    reference-policy grid; a group costs one."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: list[Item] = []
        self.since = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def add(self, item: Item) -> None:
        self.items.append(item)
        if len(self.items) == 1:
            self.since = stopwatch()
            self.timer = asyncio.get_running_loop().call_later(HOLD_S, self._on_time)
        elif len(self.items) >= GROUP or stopwatch() - self.since >= HOLD_S:
            self.flush()

    def _on_time(self) -> None:
        self.timer = None
        with contextlib.suppress(OSError):  # the parent is gone: the next send says so
            self.flush()

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.items:
            items, self.items = self.items, []
            self.conn.send(("recs", items))


def _pull(conn: Connection, outbox: _Outbox) -> Iterator[Cell]:
    """Cells from the parent, chunk by chunk. The next chunk is asked for as soon as one
    arrives, so it waits in the pipe while this one runs (one chunk at most, far below the
    pipe's buffer, so the parent never blocks sending it)."""
    conn.send(("ready",))
    while True:
        chunk = conn.recv()
        if chunk is None:
            return
        conn.send(("ready",))
        yield from chunk


def _worker(conn: Connection, concurrency: int, timeout: float | None, close: list[int],
            siblings: list[Connection], scrub: Callable[[str], str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    for fd in close:  # the parent's lock and records file: a worker holds neither
        with contextlib.suppress(OSError):
            os.close(fd)
    for other in siblings:  # so that when the parent dies, this worker's pipe says so
        other.close()

    outbox = _Outbox(conn)

    def sink(cell: Cell, record: EpisodeRecord) -> None:
        outbox.add((encoded(record, cell, scrub), *tallied(record["cell"], record["outcome"])))

    try:
        asyncio.run(stream(_pull(conn, outbox), concurrency, timeout, sink))
        outbox.flush()
        conn.send(("done",))
    except (BrokenPipeError, EOFError, ConnectionResetError):
        pass  # the parent is gone: nothing to report to
    except UsageError as exc:
        _send(conn, ("recs", outbox.items))
        _send(conn, ("usage", str(exc)))
    except BaseException:  # noqa: BLE001 - a bug: its traceback goes to the parent
        _send(conn, ("recs", outbox.items))
        _send(conn, ("crash", traceback.format_exc()))
    finally:
        sys.stdout.flush()
        os._exit(0)


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    with contextlib.suppress(OSError):
        conn.send(message)


class Pool:
    """``n`` forked workers fed chunk by chunk; records come back one message each."""

    def __init__(self, n: int, concurrency: int, timeout: float | None, close: list[int],
                 scrub: Callable[[str], str]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.procs: dict[Connection, Any] = {}
        for _ in range(n):
            parent, child = ctx.Pipe()
            siblings = [parent, *self.procs]  # the parent's ends, inherited by the fork
            proc = ctx.Process(target=_worker, daemon=True,
                               args=(child, concurrency, timeout, close, siblings, scrub))
            proc.start()
            child.close()
            self.procs[parent] = proc

    def run(self, cells: Iterator[Cell], emit: EmitGroup) -> None:
        """Run ``cells``, handing each group of records a worker sends to ``emit`` (the
        writer writes a group at once: one system call, not one per record)."""
        todo = chunks(cells, CHUNK)
        live = dict(self.procs)
        try:
            while live:
                for conn in wait(list(live)):
                    while conn in live and conn.poll(0):  # all that has arrived, then wait
                        if not self._handle(conn, live, todo, emit):
                            live.pop(conn)
        except KeyboardInterrupt:
            self._drain(live, emit)
            raise
        finally:
            self.stop()

    def _handle(self, conn: Any, live: dict[Connection, Any], chunks: Iterator[list[Cell]],
                emit: EmitGroup) -> bool:
        """One message from a worker; False once that worker is done. A worker that hangs up
        without saying so has died, whatever it was doing."""
        try:
            message = conn.recv()
        except (EOFError, OSError):
            proc = live[conn]
            proc.join(5)
            raise RunAborted(f"worker process {proc.pid} died ({_exit(proc.exitcode)}); the "
                             f"episodes it had finished are recorded, re-run to resume") from None
        kind = message[0]
        if kind == "recs":
            emit(message[1])
        elif kind == "ready":
            conn.send(next(chunks, None))
        elif kind == "done":
            return False
        elif kind == "usage":
            raise UsageError(message[1])
        elif kind == "crash":
            raise RuntimeError(f"a worker process failed:\n{message[1]}")
        return True

    def _drain(self, live: dict[Connection, Any], emit: EmitGroup) -> None:
        """Keep the records that already arrived (Ctrl-C stops the run, not the writing)."""
        for conn in live:
            with contextlib.suppress(Exception):  # a message cut by the interrupt is lost
                while conn.poll(0):
                    message = conn.recv()
                    if message[0] == "recs":
                        emit(message[1])

    def stop(self) -> None:
        for conn, proc in self.procs.items():
            if proc.is_alive():
                proc.terminate()
            proc.join(5)
            conn.close()


def _exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
