"""Judging every line of a big records file on every core: :func:`judged`.

``limbo status``, a resume's scan and the analysis's load read a run line by line, tens of
microseconds a line: on the paper run (39,600 lines, 120 MB) that is most of what ``limbo
status`` costs, done on one core while the others wait. A plain file of at least
:data:`SPLIT_BYTES` is cut at line starts into one part per core (at most :data:`MOST`). A
forked process judges each part but the first, which this process judges meanwhile, and sends
back only its verdicts (never the lines); they come out in file order, numbered as
:func:`~limbo.log.lines.lines` numbers them, so a caller sees what one pass over the lines sees.

The file is read up to the size it had when the call began (a line a writer appends meanwhile
is the next reader's, a line it is still writing ends torn there); the parts are judged
where a fork is safe: on a platform that forks, in a process with no other thread (a forked
thread-holding process may inherit a lock that nobody will release). A part whose process
fails — killed, out of memory, or its judge raising — is judged again here, so its failure is
this process's, in its place in the file. Anything else is read in one pass here: a small file,
a gzip file (which cannot be entered in the middle), one core.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Generic, TypeVar, cast

from limbo.log.lines import is_gzip, lines

T = TypeVar("T")

SPLIT_BYTES = 8 << 20
"""The smallest file worth a fork: below it a pass here is about as fast."""
MOST = 4
"""Parts at most, whatever the cores: the verdicts all come back through this process."""


@dataclass(frozen=True, slots=True)
class Spot:
    """Where a judged line is: its number (from 1), byte offset and length, and whether it
    lacks its newline (:attr:`limbo.log.lines.Line.torn`)."""

    number: int
    offset: int
    length: int
    torn: bool
    raw: bytes | None = None
    """The line, when this process read it (a helper sends back only its verdict)."""

    def line(self, path: Path) -> bytes:
        """The line's bytes: kept, or read again from ``path`` by offset (only a plain file's
        parts go to helpers)."""
        if self.raw is not None:
            return self.raw
        with path.open("rb") as fh:
            return os.pread(fh.fileno(), self.length, self.offset)


def judged(path: Path, judge: Callable[[bytes], T]) -> Generator[tuple[Spot, T], None, None]:
    """``(spot, judge(raw))`` for every line of records file ``path``, in order."""
    bounds = _bounds(path)
    if bounds is None:
        for line in lines(path):
            yield Spot(line.number, line.offset, len(line.raw), line.torn, line.raw), judge(line.raw)
        return
    helpers: list[_Helper[T]] = []
    try:
        for start, end in zip(bounds[1:], bounds[2:], strict=False):
            helpers.append(_Helper(path, start, end, judge))
        number = 0
        for offset, raw in _between(path, bounds[0], bounds[1]):
            number += 1
            yield Spot(number, offset, len(raw), not raw.endswith(b"\n"), raw), judge(raw)
        for helper in helpers:
            for offset, length, torn, verdict in helper.verdicts():
                number += 1
                yield Spot(number, offset, length, torn), verdict
    finally:
        for helper in helpers:
            helper.close()


def _bounds(path: Path) -> list[int] | None:
    """Where each part of ``path`` starts, and its size last; ``None``: read it in one pass."""
    parts = min(MOST, _cores())
    if parts < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    size = path.stat().st_size
    if size < SPLIT_BYTES or threading.active_count() > 1 or is_gzip(path):
        return None
    bounds = [0]
    with path.open("rb") as fh:
        for k in range(1, parts):
            fh.seek(max(bounds[-1], size * k // parts))
            fh.readline()  # to the start of the next line
            if fh.tell() >= size:
                break
            bounds.append(fh.tell())
    bounds.append(size)
    return bounds if len(bounds) > 2 else None


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _between(path: Path, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of every line that starts in ``[start, end)``: ``start`` is a line's
    start, and so is ``end`` unless it is the size the file had, where a line is cut."""
    with path.open("rb", buffering=1 << 20) as fh:
        fh.seek(start)
        offset = start
        for raw in fh:
            if offset >= end:
                return
            yield offset, raw[:end - offset]
            offset += len(raw)


class _Helper(Generic[T]):
    """One part judged in a forked process, its verdicts sent back through a pipe."""

    def __init__(self, path: Path, start: int, end: int, judge: Callable[[bytes], T]) -> None:
        self.path, self.start, self.end, self.judge = path, start, end, judge
        self.pid, self.pipe = 0, cast(IO[bytes] | None, None)
        try:
            read, write = os.pipe()
        except OSError:  # out of descriptors: this process judges the part
            return
        try:
            self.pid = os.fork()
        except OSError:  # out of processes or memory: likewise
            os.close(read)
            os.close(write)
            return
        if self.pid == 0:  # the helper: judge, send, leave without running anyone's cleanup
            os.close(read)
            os._exit(self._send(os.fdopen(write, "wb")))
        os.close(write)
        self.pipe = os.fdopen(read, "rb")

    def _send(self, pipe: IO[bytes]) -> int:
        gc.disable()  # short-lived: a collection would copy every page it inherited
        try:
            with pipe:
                pipe.write(pickle.dumps(list(self._judged()), pickle.HIGHEST_PROTOCOL))
        except BaseException:  # noqa: BLE001 - the parent judges this part again and meets it
            return 1
        return 0

    def _judged(self) -> Iterator[tuple[int, int, bool, T]]:
        for offset, raw in _between(self.path, self.start, self.end):
            yield offset, len(raw), not raw.endswith(b"\n"), self.judge(raw)

    def verdicts(self) -> Iterator[tuple[int, int, bool, T]]:
        """The helper's verdicts, or this process's own, line by line, if the helper failed."""
        if self.pipe is None:
            return self._judged()
        with self.pipe:
            data = self.pipe.read()
        self.pipe = None
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        if os.waitstatus_to_exitcode(status) == 0:
            with contextlib.suppress(Exception):
                found: list[tuple[int, int, bool, T]] = pickle.loads(data)
                return iter(found)
        return self._judged()

    def close(self) -> None:
        """Stop and reap the helper if its verdicts were never asked for."""
        if self.pipe is not None:
            self.pipe.close()
            self.pipe = None
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.pid = 0
