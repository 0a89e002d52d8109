"""The proxy's durable journal: one episode's ledger and event log, one JSON line per entry,
in ``RUN_DIR/proxy/<episode>.jsonl``.

Why a journal and not just the record: a proxy killed mid-episode (``kill -9``, a lost machine)
must lose no write the upstream acknowledged. Before a write is forwarded an ``intent`` line is
appended and synced to disk. When the upstream answers, an ``ack`` line is appended before the
agent gets the answer; it reaches the disk with the next sync (the next write's ``intent``, the
end of the episode) or the kernel's own writeback, whichever comes first — group commit, so one
sync per write sits between the agent and its answer, not two. A killed process loses nothing
it handed the kernel, so after ``kill -9`` every ``ack`` is there. A lost machine may lose the
last answers: their writes are then ``intent`` lines without an ``ack``, which reconciliation
settles against the upstream's own state, as it does every write whose answer never came.
Everything else (the agent's calls and results, the fault) is appended without a sync of its
own, and later still (:meth:`Journal.defer`): once the answer in hand is on its way — right
after it is written over stdio, at the event loop's next turn over HTTP — in one write with the
lines deferred beside it (a call's line with its result's), off the path between the agent and
its answer. A ledger line is never deferred, and goes after the lines deferred
before it, so the journal keeps their order; a killed proxy may lose the event lines of its
last turn, never a ledger line.

Line types: ``start`` (the cell, the upstream, the task), ``baseline`` (what the upstream's
reads listed before the agent began), ``intent`` / ``ack`` / ``lost`` / ``reconciled`` (the
ledger), every :mod:`limbo.sim.events` type (the event log), and ``recorded`` (the episode's
record was written). The record is built from the journal alone, after a normal end and after a
crash alike. The record is the commit point: ``recorded`` is written after it, and an episode
whose record exists counts as recorded whether or not its journal got the mark (a crash between
the two).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from limbo.base.errors import UsageError

if TYPE_CHECKING:
    import asyncio

FOLDER = "proxy"
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                           default=str)
_DATASYNC = getattr(os, "fdatasync", os.fsync)
"""``fdatasync`` where there is one: an appended line and the file's new length reach the disk
(what reading the journal back needs) without the rest of the inode's metadata."""


def journal_path(run_dir: Path, episode_id: str) -> Path:
    return run_dir / FOLDER / f"{episode_id}.jsonl"


class Journal:
    """Appends entries to one episode's journal: created (``new``: one journal per episode),
    or reopened to add what recovery found."""

    def __init__(self, path: Path, scrub: Callable[[str], str], new: bool = True) -> None:
        self.path, self.scrub = path, scrub
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if new else 0)
        self._deferred: list[Callable[[], dict[str, Any]]] = []
        self._flushing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(path, flags, 0o600)
        except OSError as exc:
            raise UsageError(f"cannot create the proxy journal {path}: {exc.strerror}") from None

    def write(self, entry: dict[str, Any], sync: bool = False) -> None:
        """Append ``entry`` now (after the lines deferred before it); ``sync``: on disk before
        this returns (an ``intent``)."""
        self._append([*self._drain(), self._line(entry)])
        if sync:
            _DATASYNC(self.fd)  # and every line appended before it

    def defer(self, entry: Callable[[], dict[str, Any]], soon: bool = True) -> None:
        """Append the entry ``entry()`` makes at the event loop's next turn (or with the next
        :meth:`write`, or at :meth:`close`, whichever comes first); not ``soon``: with the next
        entry that is (a call's event waits for its result's: one write for the two)."""
        self._deferred.append(entry)
        if soon and not self._flushing:
            import asyncio  # here: `limbo status` reads journals and never runs a loop

            self._flushing = True
            self._loop = self._loop or asyncio.get_running_loop()
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Append the deferred entries now."""
        self._flushing = False
        if self._deferred and self.fd >= 0:
            self._append(self._drain())

    def _drain(self) -> list[bytes]:
        made, self._deferred = self._deferred, []
        return [self._line(make()) for make in made]

    def _line(self, entry: dict[str, Any]) -> bytes:
        return (self.scrub(_ENCODE.encode(entry)) + "\n").encode("utf-8", "backslashreplace")

    def _append(self, lines: list[bytes]) -> None:
        data = b"".join(lines)
        done = 0
        while done < len(data):
            done += os.write(self.fd, data[done:])

    def close(self) -> None:
        """Append what is deferred, sync and close (once: a second call must not close a
        descriptor since reused)."""
        with contextlib.suppress(OSError):
            self.flush()
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                _DATASYNC(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every complete entry of a journal, in order. A torn last line (the process was killed
    while writing it) is left out: a ledger entry is synced before anyone relies on it."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read the proxy journal {path}: {exc.strerror}") from None
    out = []
    for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
        try:
            entry = json.loads(raw)
        except ValueError:
            raise UsageError(f"{path} line {number} is not a journal entry; the journal was "
                             f"changed by something other than limbo proxy") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise UsageError(f"{path} line {number} is not a journal entry")
        out.append(entry)
    return out


def unrecorded(run_dir: Path, recorded: Collection[str] = ()) -> list[Path]:
    """The journals in ``run_dir`` whose episode has no record yet (their proxy stopped before
    writing it: killed, or still running): no ``recorded`` mark, and (given the ids the
    directory's records hold) no record either."""
    folder = run_dir / FOLDER
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.jsonl"))
            if not _recorded(p) and p.stem not in recorded]


def _recorded(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            tail = fh.read()
    except OSError:
        return False
    return b'"type":"recorded"' in tail
