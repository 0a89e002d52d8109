"""``--workers N``: episodes in forked worker processes (:class:`Forked`).

Only the parent process writes: a worker sends its records over a pipe in small groups, none
held more than 20 ms, and the parent writes each group with one write, so a kill of the whole
run loses the episodes in flight and at most the last 20 ms of finished ones. Workers each take
small chunks of cells from the parent (the next one waiting in the pipe while they run the
current one) and run them as :func:`limbo.run.local.stream` does in one process.

What the workers share they get as they fork, from the run's context: one
:class:`~limbo.run.budget.SharedBudget` (in shared memory: no worker starts an episode once it
is spent, whichever worker spent it, and the parent then hands out no more cells), and one call
limiter (:class:`~limbo.run.limiter_host.LimiterHost`, on a thread of the parent: a ``429``
seen by one worker holds back the others' calls). Workers ignore Ctrl-C: the parent alone
handles it, keeps what already arrived, and stops them. A worker that dies (killed, out of
memory) stops the run with one line; what finished is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, cast

from limbo.base.errors import UsageError
from limbo.base.runtime import stopwatch
from limbo.log.records import EpisodeRecord
from limbo.providers.limiter import set_limiter_factory
from limbo.run.budget import Budget, SharedBudget
from limbo.run.context import Item, RunContext, Settings, Sink
from limbo.run.leases import LeasedLimiter
from limbo.run.limiter_host import LimiterHost, SocketHost
from limbo.run.local import CHUNK, HOLD_S, InProcess, RunAborted, encoded, freeze_heap, stream
from limbo.run.summary import tallied
from limbo.sim.cell import Cell

EmitGroup = Callable[[list[Item]], None]
GROUP = 32
"""A worker sends its records in groups of at most GROUP, none held longer than HOLD_S (about
180 kB of reference-policy records; on a quiet machine a worker ends about 28 episodes in
HOLD_S, and each group it sends is a wake-up, a read and a write for the parent)."""


class Forked:
    """:class:`~limbo.run.context.Executor` of ``--workers N`` forked processes (a pass with
    one cell or one worker runs in this process instead). The limiter host starts with the
    first pass and lives until :meth:`close`, shared by the command's runs. The workers of a
    pass serve each of its runs — a ``--precision`` pass runs a round at a time, and forking
    anew for each round cost four times the episodes' own time — and stop when another pass
    starts, or the executor closes."""

    def __init__(self) -> None:
        self.host: LimiterHost | None = None
        self.pool: Pool | None = None
        self.serves: tuple[Any, ...] = ()
        """What :attr:`pool` was forked for: its pass's records and lock (the list itself,
        held, so that no later pass's can be taken for it), budget, settings, workers."""

    def budget(self, max_cost: float) -> Budget:
        return SharedBudget(max_cost)

    def run(self, cells: Iterator[Cell], ctx: RunContext, budget: Budget | None,
            sink: Sink) -> None:
        if ctx.workers <= 1:
            InProcess().run(cells, ctx, budget, sink)
            return
        assert budget is None or isinstance(budget, SharedBudget), "made by Forked.budget"
        pool = self._pool(ctx, budget, sink)
        size = max(1, min(CHUNK, sink.total // (2 * ctx.workers)))
        pool.run(chunks(cells, size), _halting(sink, pool.halt))

    def _pool(self, ctx: RunContext, budget: SharedBudget | None, sink: Sink) -> Pool:
        """This pass's workers: those of its earlier runs while all of them live, else new."""
        serves = (sink.keep_fds, budget, ctx.settings, ctx.workers, sink.scrub)
        same = len(serves) == len(self.serves) and all(
            a is b for a, b in zip(serves, self.serves, strict=True))
        if self.pool is not None and same and self.pool.again():
            return self.pool
        self._stop()
        if self.host is None:
            self.host = LimiterHost()
        halt = multiprocessing.get_context("fork").Value("b", 0, lock=False)
        given = _Given(ctx.settings, budget, self.host.path, "", sink.keep_fds, halt)
        self.pool, self.serves = Pool(ctx.workers, given, sink.scrub), serves
        return self.pool

    def _stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        self.pool, self.serves = None, ()

    def limits(self) -> dict[str, dict[str, int]] | None:
        """The shared limiter's :meth:`~limbo.run.leases.SlotKeeper.report` (``None``: no
        worker has started yet)."""
        return self.host.report() if self.host is not None else None

    def close(self) -> None:
        self._stop()
        if self.host is not None:
            self.host.close()
            self.host = None


def _halting(sink: Sink, halt: Any) -> EmitGroup:
    """``sink.emit_group`` that raises the workers' shared flag once the writer halts the
    pass (:mod:`limbo.run.breaker`): each worker then starts none of the cells it holds."""

    def emit(items: list[Item]) -> None:
        sink.emit_group(items)
        if not halt.value and sink.halted():
            halt.value = 1

    return emit


def _until_halted(cells: Iterator[Cell], halt: Any) -> Iterator[Cell]:
    """``cells`` until the writer raises the shared flag."""
    for cell in cells:
        if halt.value:
            return
        yield cell


def chunks(cells: Iterator[Cell], size: int) -> Iterator[list[Cell]]:
    """``cells`` in lists of ``size``: :data:`~limbo.run.local.CHUNK`, or fewer when the pass
    is small, so that every worker gets a share (a worker asks for its next chunk as soon as
    its first arrives: with chunks of 32, a pass of 64 model episodes ran on one worker)."""
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


@dataclass(frozen=True)
class _Given:
    """What a worker is handed as it forks: the run's context and what its processes share."""

    settings: Settings
    budget: SharedBudget | None
    limiter: str
    """The :class:`~limbo.run.limiter_host.LimiterHost`'s socket."""
    lessee: str
    """What the shared limiter knows this worker by."""
    close: list[int]
    """The parent's lock and records file: a worker holds neither."""
    halt: Any = None
    """A flag in shared memory the writer raises to stop the pass (``None``: never)."""


def _worker(conn: Connection, given: _Given, siblings: list[Connection],
            scrub: Callable[[str], str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    freeze_heap()  # what it inherits, the parent's cells among them, lives until it exits
    for fd in given.close:
        with contextlib.suppress(OSError):
            os.close(fd)
    for other in siblings:  # so that when the parent dies, this worker's pipe says so
        other.close()
    host = SocketHost(given.limiter)
    set_limiter_factory(lambda key: LeasedLimiter(key, host, given.lessee))

    outbox = _Outbox(conn)

    def sink(cell: Cell, record: EpisodeRecord) -> None:
        outbox.add((encoded(record, cell, scrub), *tallied(record)))

    try:
        with asyncio.Runner() as loop:  # one for the worker's life (see _heard)
            while True:  # a run of the pass, then the next when the parent says "again"
                pulled = _pull(conn, outbox)
                mine = pulled if given.halt is None else _until_halted(pulled, given.halt)
                loop.run(stream(mine, given.settings, sink, given.budget))
                outbox.flush()
                for _cell in pulled:  # refused by the budget, or halted: no more cells come
                    pass
                conn.send(("done",))
                if loop.run(_heard(conn)) != "again":
                    break
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


async def _heard(conn: Connection) -> Any:
    """The parent's next word, awaited on the worker's one loop: the shared limiter's client
    lives on it (its connection to the keeper, the timers that report outcomes and give back
    idle slots). A loop per run stranded them, and the next ``--precision`` round that needed
    a slot or saw a ``429`` waited forever; a loop stopped between runs would keep idle slots
    from the other workers."""
    loop, readable = asyncio.get_running_loop(), asyncio.Event()
    loop.add_reader(conn.fileno(), readable.set)
    try:
        await readable.wait()
    finally:
        loop.remove_reader(conn.fileno())
    return conn.recv()


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    with contextlib.suppress(OSError):
        conn.send(message)


class Pool:
    """``n`` forked workers fed chunk by chunk; records come back in groups. Once the budget
    has refused an episode, a worker asking for cells gets none."""

    def __init__(self, n: int, given: _Given, scrub: Callable[[str], str]) -> None:
        ctx = multiprocessing.get_context("fork")
        self.budget, self.halt = given.budget, given.halt
        self.procs: dict[Connection, Any] = {}
        for i in range(n):
            parent, child = ctx.Pipe()
            _roomy(child)
            siblings = [parent, *self.procs]  # the parent's ends, inherited by the fork
            mine = replace(given, lessee=f"worker{i}")
            proc = ctx.Process(target=_worker, daemon=True,
                               args=(child, mine, siblings, scrub))
            proc.start()
            child.close()
            self.procs[parent] = proc

    def again(self) -> bool:
        """Ask every worker, done with the last run, for another; ``False`` if one is gone."""
        try:
            for conn, proc in self.procs.items():
                if not proc.is_alive():
                    return False
                conn.send("again")
        except OSError:
            return False
        return True

    def run(self, todo: Iterator[list[Cell]], emit: EmitGroup) -> None:
        """Run the chunks of cells ``todo``, handing each group of records a worker sends to
        ``emit`` (the writer writes a group at once: one system call, not one per record).
        The workers then wait for :meth:`again`, or :meth:`stop`; a run that fails stops
        them."""
        live = dict(self.procs)
        # One selector, each worker registered once: ``multiprocessing.connection.wait`` and
        # ``Connection.poll`` build one per call, a third of the parent's loop.
        ready = selectors.DefaultSelector()
        for conn in live:
            ready.register(conn, selectors.EVENT_READ)
        try:
            while live:
                for key, _ in ready.select():  # one message each (a worker with more to
                    conn = cast(Connection, key.fileobj)  # say is ready again at once)
                    if conn in live and not self._handle(conn, live, todo, emit):
                        live.pop(conn)
                        ready.unregister(conn)
        except KeyboardInterrupt:
            self._drain(live, emit)
            self.stop()
            raise
        except BaseException:
            self.stop()
            raise
        finally:
            ready.close()

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
            spent = self.budget is not None and self.budget.closed()
            conn.send(None if spent else next(chunks, None))
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


SEND_BUFFER = 1 << 20
"""Bytes a worker's socket may hold on their way to the parent: a few groups of records. At the
default (about 200 kB, one group of reference-policy records) a worker waited on the parent,
while a busy machine had it off the processor, for about a twentieth of its time."""


def _roomy(conn: Connection) -> None:
    """Ask for :data:`SEND_BUFFER` on the worker's end of its socket (the kernel caps it at
    what it allows, ``net.core.wmem_max``; asking less is harmless)."""
    with contextlib.suppress(OSError):
        end = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        finally:
            end.close()


def _exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
