"""Judging every line of a big records file on every core: :func:`judged`.

``limbo status`` and a resume's scan read a run line by line, tens of microseconds a line: on
the paper run (39,600 lines, 120 MB) that is most of what ``limbo status`` costs, done on one
core while the others wait. A plain file of at least :data:`SPLIT_BYTES` is cut at line starts
into one part per core (at most :data:`MOST`). A helper process
(:class:`~limbo.base.beside.Beside`) judges each part but the first, which this process judges
meanwhile, and sends back only its verdicts (never the lines); they come out in file order,
numbered as :func:`~limbo.log.lines.lines` numbers them, so a caller sees what one pass over
the lines sees.

The file is opened once, and every part read from that open file by offset (a file replaced
meanwhile, as a quarantine replaces one, is not read in part), up to the size it had then (a
line a writer appends meanwhile is the next reader's, one it is still writing ends torn there).
A part whose helper fails — killed, out of memory, or its judge raising — is judged again here,
so its failure is this process's, in its place in the file. Anything else is read in one pass
here: a small file, a gzip file (which cannot be entered in the middle), one core, a process
where a fork is not safe (:func:`~limbo.base.beside.can_fork`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

from limbo.base.beside import Beside, can_fork, cores
from limbo.log.lines import is_gzip, lines, split

T = TypeVar("T")

SPLIT_BYTES = 8 << 20
"""The smallest file worth a fork: below it a pass here is about as fast."""
MOST = 4
"""Parts at most, whatever the cores: the verdicts all come back through this process."""


class Spot(NamedTuple):
    """Where a judged line is: its number (from 1), byte offset and length, and whether it
    lacks its newline (:attr:`limbo.log.lines.Line.torn`). A tuple: one is made per line."""

    number: int
    offset: int
    length: int
    torn: bool
    raw: bytes | None = None
    """The line, when this process read it (a helper sends back only its verdict)."""
    source: _Source | None = None

    def line(self) -> bytes:
        """The line's bytes: kept, or read again from the file judged (while it is judged)."""
        if self.raw is not None:
            return self.raw
        assert self.source is not None, "a spot without its line was read by a helper"
        return self.source.read(self.offset, self.length)


def judged(path: Path, judge: Callable[[bytes], T]) -> Generator[tuple[Spot, T], None, None]:
    """``(spot, judge(raw))`` for every line of records file ``path``, in order."""
    parts = _parts()
    if parts < 2 or is_gzip(path):
        yield from _one_pass(path, judge)
        return
    with _Source(path) as source:
        bounds = source.bounds(parts)
        if bounds is None:
            yield from _one_pass(path, judge)
            return
        helpers: list[_Helper[T]] = []
        try:
            for start, end in zip(bounds[1:], bounds[2:], strict=False):
                helpers.append(_Helper(source, start, end, judge))
            number = 0
            for offset, raw in source.lines(bounds[0], bounds[1]):
                number += 1
                yield Spot(number, offset, len(raw), not raw.endswith(b"\n"), raw), judge(raw)
            for helper in helpers:
                for offset, length, torn, verdict in helper.verdicts():
                    number += 1
                    yield Spot(number, offset, length, torn, source=source), verdict
        finally:
            for helper in helpers:
                helper.close()


def _one_pass(path: Path, judge: Callable[[bytes], T]) -> Iterator[tuple[Spot, T]]:
    for line in lines(path):
        yield Spot(line.number, line.offset, len(line.raw), line.torn, line.raw), judge(line.raw)


def _parts() -> int:
    """Parts worth cutting a file into here: one where a fork is not safe."""
    return min(MOST, cores()) if can_fork() else 1


class _Source:
    """The judged file, open once: read by offset (``os.pread``), so that this process and
    its helpers, which share the open file, never move each other's place in it."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        self.fd = -1

    def read(self, offset: int, length: int) -> bytes:
        if self.fd < 0:
            raise ValueError("the file is no longer being judged: read its lines while it is")
        return os.pread(self.fd, length, offset)

    def bounds(self, parts: int) -> list[int] | None:
        """Where each part starts, and the size last; ``None``: one part will do."""
        if self.size < SPLIT_BYTES:
            return None
        bounds = [0]
        for k in range(1, parts):
            start = self._next_line(max(bounds[-1], self.size * k // parts))
            if start >= self.size:
                break
            bounds.append(start)
        return [*bounds, self.size] if len(bounds) > 1 else None

    def _next_line(self, at: int) -> int:
        """Where the first line that starts after ``at`` starts (the size if none does)."""
        while at < self.size:
            block = self.read(at, 1 << 16)
            found = block.find(b"\n")
            if found >= 0:
                return at + found + 1
            if not block:  # cut short since it was opened
                break
            at += len(block)
        return self.size

    def lines(self, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        """(offset, line) of every line from ``start`` (where a line starts) to ``end``
        (where one starts, or the size, where a line is cut)."""
        chunks = (self.read(at, min(1 << 20, end - at)) for at in range(start, end, 1 << 20))
        for line in split(chunks):
            yield start + line.offset, line.raw


class _Helper(Generic[T]):
    """One part judged beside this process (:class:`~limbo.base.beside.Beside`), or here,
    line by line, if its helper failed."""

    def __init__(self, source: _Source, start: int, end: int, judge: Callable[[bytes], T]) -> None:
        self.source, self.start, self.end, self.judge = source, start, end, judge
        self.beside = Beside(lambda: list(self._judged()))

    def _judged(self) -> Iterator[tuple[int, int, bool, T]]:
        for offset, raw in self.source.lines(self.start, self.end):
            yield offset, len(raw), not raw.endswith(b"\n"), self.judge(raw)

    def verdicts(self) -> Iterator[tuple[int, int, bool, T]]:
        """(offset, length, torn, verdict) of each line of the part, in order."""
        found = self.beside.result()
        return iter(found) if found is not None else self._judged()

    def close(self) -> None:
        self.beside.close()
