"""Whose ``KeyboardInterrupt`` is it? Only the user's own Ctrl-C may stop a run.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to
be, and any code can also ``raise KeyboardInterrupt`` itself: a plugin adapter that does so
must end its own episode as ``infra_error``, not stop the grid, and a re-run must not stop
the same way forever. The two look the same, so while a ``limbo`` command runs its SIGINT
handler is a :class:`Watch`, which counts the signals it receives before raising what
Python's own handler raises. :func:`from_user` then tells them apart.

The count lives in the installed handler itself (the process's signal table), not in a module
variable: a signal belongs to the whole process, and a forked worker, which ignores SIGINT
(its parent handles Ctrl-C), sees ``SIG_IGN`` there and so knows that no interrupt it meets is
the user's.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Watch:
    """The SIGINT handler of a running command: counts the signals, then raises
    ``KeyboardInterrupt`` exactly as Python's default handler does — or, inside
    :func:`whole`, on the way out of it."""

    def __init__(self) -> None:
        self.received = 0
        self.holding = 0
        self.pending = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received += 1
        if self.holding and not self.pending:  # a second Ctrl-C is not held: a way out
            self.pending = True
            return
        signal.default_int_handler(signum, frame)


class whole:  # lower case: used as ``with whole():``, as a contextlib context manager is
    """Run the block whole: a Ctrl-C that arrives inside is raised as it ends (a record
    written to the run's file is then counted too, so the manifest's count is the file's); a
    second one is raised at once, should the block hang.
    If the block raises, its own exception goes on and the Ctrl-C is still counted
    (:func:`from_user`). Outside :func:`watching`, or off the main thread, nothing is held.

    It finds the command's :class:`Watch` where :func:`watching` keeps it, not in the signal
    table: asking that costs 6 microseconds, and a run's writer enters a block for every group
    of records. A forked worker inherits the Watch, which never hears a signal there (the
    worker ignores SIGINT), so holding one changes nothing."""

    __slots__ = ("watch",)

    def __init__(self) -> None:
        self.watch = _WATCHES[-1] if _WATCHES else None

    def __enter__(self) -> None:
        if self.watch is not None and threading.current_thread() is not threading.main_thread():
            self.watch = None
        if self.watch is not None:
            self.watch.holding += 1

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        watch = self.watch
        if watch is None:
            return
        watch.holding -= 1
        if watch.pending and not watch.holding:  # held to the outermost end
            watch.pending = False
            if kind is None:  # else the block's own exception goes on
                raise KeyboardInterrupt


_WATCHES: list[Watch] = []
"""The Watch of each :func:`watching` block this process is inside, innermost last."""


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Count the user's Ctrl-C while inside (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before, watch = signal.getsignal(signal.SIGINT), Watch()
    signal.signal(signal.SIGINT, watch)
    _WATCHES.append(watch)
    try:
        yield
    finally:
        _WATCHES.remove(watch)
        signal.signal(signal.SIGINT, before)


def from_user() -> bool:
    """Whether a ``KeyboardInterrupt`` met now can be the user's Ctrl-C: a SIGINT has been
    received under :func:`watching`. In a process that ignores SIGINT (a worker) none can be;
    where nobody counts (library code under Python's own handler) any may be, as Python
    assumes."""
    handler = signal.getsignal(signal.SIGINT)
    if isinstance(handler, Watch):
        return handler.received > 0
    return handler is not signal.SIG_IGN
