"""How a run's pass hears its records: each written once to the run's records file, counted in
the summary and the error streak, and shown to a ``--precision`` schedule (the executor's
:class:`~limbo.run.context.Sink`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from limbo.base.interrupts import whole
from limbo.base.secrets import scrubber
from limbo.log.store import RecordWriter
from limbo.run.breaker import Breaker
from limbo.run.context import Item
from limbo.run.summary import Summary
from limbo.sim.cell import Cell


def wanted(cells: Iterable[Cell], ids: set[str], halted: Callable[[], bool]) -> Iterator[Cell]:
    """The cells whose ids are in ``ids``, each once, until ``halted()``."""
    for cell in cells:
        if halted():
            return
        if cell.episode_id in ids:
            ids.discard(cell.episode_id)
            yield cell


class PassTally:
    """Writes each record and keeps the counts, the summary and the error streak (the
    executor's :class:`~limbo.run.context.Sink`)."""

    def __init__(self, writer: RecordWriter, total: int, keep_fds: list[int],
                 on_result: Callable[[int, int, Summary], None] | None,
                 breaker: Breaker, observe: Callable[[bytes], None] | None = None) -> None:
        self.writer, self.total, self.on_result = writer, total, on_result
        self.observe = observe
        """Hears every record's line once it is written (a ``--precision`` schedule)."""
        self.keep_fds = keep_fds
        """The run's lock and records file: a forked worker closes them."""
        self.summary, self.ran = Summary(), 0
        self.scrub = scrubber()
        self.breaker = breaker

    def halted(self) -> bool:
        return self.breaker.tripped is not None

    def _count(self, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        self.summary.add(cell, outcome)
        self.breaker.see(cell["model"], outcome["termination"], outcome.get("termination_reason"))

    def emit(self, line: bytes, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        with whole():  # a Ctrl-C between the write and the count would leave one uncounted
            self.writer.write(line)
            self._count(cell, outcome)
            self.ran += 1
            if self.observe is not None:
                self.observe(line)
        if self.on_result is not None:
            self.on_result(self.ran, self.total, self.summary)

    def emit_group(self, items: list[Item]) -> None:
        """A worker's group of records, written with one ``write``: a failed write is cut back
        off the file whole (:class:`RecordWriter`), so the file still never ends in part of a
        record, and none of the group counts as done."""
        if not items:
            return
        with whole():
            self.writer.write(b"".join(item[0] for item in items))
            for line, cell, outcome in items:
                self._count(cell, outcome)
                if self.observe is not None:
                    self.observe(line)
            self.ran += len(items)
        if self.on_result is not None:
            self.on_result(self.ran, self.total, self.summary)


class Round:
    """The tally as an executor sees it for one ``--precision`` round: a pass of the round's
    cells (a forked pass sizes its chunks by ``total``, so a small round still reaches every
    worker), whose records go to the run's one tally."""

    def __init__(self, tally: PassTally, total: int) -> None:
        self.tally, self.total = tally, total
        self.scrub, self.keep_fds = tally.scrub, tally.keep_fds

    def emit(self, line: bytes, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        self.tally.emit(line, cell, outcome)

    def emit_group(self, items: list[Item]) -> None:
        self.tally.emit_group(items)

    def halted(self) -> bool:
        return self.tally.halted()
