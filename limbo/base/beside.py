"""Work done in a forked process beside this one: :class:`Beside`, and :func:`in_turns`.

A command that reads a big run on one core leaves the others idle: :mod:`limbo.log.spread`
judges a records file's parts beside the reading process, ``limbo tables`` and ``limbo
figures`` build their tables and figures in turns with a helper. The helper starts with
everything this process holds (a fork), computes one function, and sends back only its pickled
result. A fork is made only where it is safe (:func:`can_fork`); a helper that cannot start,
dies, or raises gives ``None``, and the caller does the work itself — so a failure is met where
the work would have been done without a helper, and nothing is lost.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import IO, Generic, TypeVar, cast

T = TypeVar("T")
K = TypeVar("K")


def can_fork() -> bool:
    """Whether a helper may be forked here: the platform forks, and no other thread runs (a
    forked copy of a thread-holding process may inherit a lock nobody will release)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Beside(Generic[T]):
    """``work()`` computed in a forked process (call :meth:`result`, or :meth:`close` to give
    it up). Only for a caller that asked :func:`can_fork`."""

    def __init__(self, work: Callable[[], T]) -> None:
        self.pid, self.pipe = 0, cast(IO[bytes] | None, None)
        try:
            read, write = os.pipe()
        except OSError:  # out of descriptors: the caller does the work
            return
        try:
            self.pid = os.fork()
        except OSError:  # out of processes or memory: likewise
            os.close(read)
            os.close(write)
            return
        if self.pid == 0:  # the helper: work, send, leave without running anyone's cleanup
            os.close(read)
            os._exit(_send(work, os.fdopen(write, "wb")))
        os.close(write)
        self.pipe = os.fdopen(read, "rb")

    def result(self) -> T | None:
        """What ``work()`` returned in the helper; ``None`` if it did not (do it here)."""
        if self.pipe is None:
            return None
        with self.pipe:
            data = self.pipe.read()
        self.pipe = None
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        try:
            found: T = pickle.loads(data)
        except Exception:  # noqa: BLE001 - a result cut short: do the work here
            return None
        return found

    def close(self) -> None:
        """Stop and reap the helper if its result was never asked for."""
        if self.pipe is not None:
            self.pipe.close()
            self.pipe = None
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.pid = 0


def _send(work: Callable[[], object], pipe: IO[bytes]) -> int:
    gc.disable()  # short-lived: a collection would copy every page it inherited
    try:
        with pipe:
            pipe.write(pickle.dumps(work(), pickle.HIGHEST_PROTOCOL))
    except BaseException:  # noqa: BLE001 - the caller does this work again and meets it
        return 1
    return 0


def in_turns(items: Sequence[K], work: Callable[[K], T]) -> list[T]:
    """``[work(item) for item in items]``, on two cores where a fork is safe: this process
    and a helper each take the next item not yet taken until none is left, so neither waits on
    the other's costly ones. An item a helper that failed took is worked here, after the
    others; each item is worked once unless its helper failed on it."""
    if len(items) < 2 or cores() < 2 or not can_fork():
        return [work(item) for item in items]
    turn = multiprocessing.get_context("fork").Value("i", 0)

    def taken() -> dict[int, T]:
        out: dict[int, T] = {}
        while True:
            with turn.get_lock():
                i, turn.value = turn.value, turn.value + 1
            if i >= len(items):
                return out
            out[i] = work(items[i])

    helper = Beside(taken)
    try:
        done = taken()
        done.update(helper.result() or {})
    finally:  # an interrupt here, or a bug: the helper is not left behind
        helper.close()
    return [done[i] if i in done else work(item) for i, item in enumerate(items)]
