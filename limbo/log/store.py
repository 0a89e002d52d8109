"""The run directory as a store: records, quarantine and manifests.

Layout of ``RUN_DIR`` (one concept per file; only the record files match ``episodes*.jsonl``):

- ``episodes.jsonl`` or, with ``--shard I/N``, ``episodes.shard-I-of-N.jsonl`` — one record per
  line, appended with one ``write`` as each episode ends (or as a worker's group of them
  arrives, :mod:`limbo.run.local`), so a killed run loses only the episodes in flight. Readers take a record's id from the first complete, valid line that has
  it; later copies are duplicates.
- ``quarantine.jsonl`` — lines moved out of a records file because they do not hold a valid
  record (torn by a kill, not UTF-8, not JSON, not a record, a termination or event type outside
  the closed sets, a duplicate), each with the file, the line number, the reason and the raw
  bytes. Their cells run again. A record of a schema version this LIMBO does not read is not a
  bad line: readers refuse the directory with one line (see :mod:`limbo.log.records`). Moving
  lines aside is :mod:`limbo.log.moves`.
- ``superseded.jsonl`` — the records of errored cells that ``limbo run --retry-errors`` ran
  again, as they were: history, which no reader of the run counts (:mod:`limbo.log.moves`).
- ``manifest.json`` / ``manifest.shard-I-of-N.json`` — the grid's identity (a fingerprint of its
  cells), counts and the run's status (see :mod:`limbo.run.runner`).
- ``.writer.*.lock``, ``.writers.lock`` — who writes (see :mod:`limbo.log.runlock`);
  ``.reserve.*`` — space held back so that a full disk can still be reported in the manifest.

A writer repairs (quarantines) only the records files no other writer can be appending to: its
own shard's file, or every file when it holds the whole directory. Bad lines elsewhere are
skipped by readers (never counted as done) and reported by ``limbo status``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from limbo.base.errors import UsageError
from limbo.log.errored import ERROR_TERMINATIONS, TIMEOUT
from limbo.log.quick import Glance, glance, tallied_line
from limbo.log.rated import rated
from limbo.log.reader import UNKNOWN, RecordError, Skip, decode, lines, validate
from limbo.log.spread import judged

if TYPE_CHECKING:
    from limbo.log.records import EpisodeRecord

EPISODES_GLOB = "episodes*.jsonl"
QUARANTINE = "quarantine.jsonl"
SUPERSEDED = "superseded.jsonl"
_SHARD_FILE = re.compile(r"^episodes\.shard-(\d+)-of-(\d+)\.jsonl$")
RESERVE_BYTES = 256 * 1024
RETRYABLE = (*ERROR_TERMINATIONS, TIMEOUT)
_Judged = TypeVar("_Judged")


class StoreError(UsageError):
    """Writing the run directory failed (a full disk, an I/O error): one line for the user."""


def episodes_file(run_dir: Path, shard: tuple[int, int] | None) -> Path:
    if shard is None:
        return run_dir / "episodes.jsonl"
    return run_dir / f"episodes.shard-{shard[0]}-of-{shard[1]}.jsonl"


def shard_of(path: Path) -> tuple[int, int] | None:
    """The shard a records file belongs to; ``None`` for ``episodes.jsonl`` or any other name."""
    found = _SHARD_FILE.match(path.name)
    return (int(found.group(1)), int(found.group(2))) if found else None


def record_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.glob(EPISODES_GLOB) if p.is_file())


# ------------------------------------------------------------------ one line


_RECORD = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False,
                           check_circular=False)
"""The records' one encoder, built once: ``json.dumps`` with these options builds a new one per
call, a tenth of encoding a reference-policy record. It keeps no state between calls. Without
the circular-reference check (another seventh of the encoding): a record is a tree built by the
episode, and one that is not ends in a :class:`RecursionError`, reported as the check would."""


def encode(record: EpisodeRecord | dict[str, Any], scrub: Callable[[str], str] | None = None) -> bytes:
    """One record as one strict JSON line of valid UTF-8 (key order as built; deterministic).
    Raises :class:`ValueError` for a record that would not read back (NaN, lone surrogates)."""
    try:
        text = _RECORD.encode(record)
    except RecursionError:  # what the circular-reference check would have reported
        raise ValueError("the record refers to itself or is nested too deeply") from None
    if scrub is not None:
        text = scrub(text)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError as exc:
        raise ValueError(f"the record holds a lone surrogate ({exc.reason})") from None


def dumps(record: EpisodeRecord | dict[str, Any]) -> str:
    """One record as one JSON line, without the newline (see :func:`encode`)."""
    return encode(record).decode("utf-8")[:-1]


# ------------------------------------------------------------------ scanning


@dataclass
class BadLine:
    path: Path
    line: int
    reason: str
    raw: bytes
    torn: bool = False

    def describe(self) -> str:
        return f"{self.path.name} line {self.line}: {self.reason}"


@dataclass
class FileStats:
    records: int = 0
    bad: int = 0


@dataclass(frozen=True)
class Errored:
    """Where a record that ended in an error (or a timeout) is, and why it ended so."""

    termination: str
    reason: str | None
    model: str
    path: Path
    line: int


@dataclass
class Scan:
    """What the records files hold: the ids done (first valid copy), every line that is not a
    valid new record, per-termination counts, and the records that ended in an error or a
    timeout (what ``--retry-errors`` runs again)."""

    ids: set[str] = field(default_factory=set)
    bad: list[BadLine] = field(default_factory=list)
    terminations: Counter[str] = field(default_factory=Counter)
    rated: int = 0
    """Records that enter rates (:func:`limbo.log.rated.rated`)."""
    files: dict[str, FileStats] = field(default_factory=dict)
    errored: dict[str, Errored] = field(default_factory=dict)
    read: tuple[tuple[str, int, int, int], ...] = ()
    """The records files as they stood when the scan began: name, inode, size, modification
    time (what :meth:`still` compares)."""

    def still(self, run_dir: Path) -> bool:
        """Whether ``run_dir``'s records files are still the ones this scan read, unchanged: an
        append changes a size, a rewrite an inode or a time."""
        return self.read == _stood(record_files(run_dir))


def _parse(path: Path, number: int, raw: bytes) -> EpisodeRecord | Skip:
    """The reader's judgement of a line; a record of a version this LIMBO does not read is
    refused (:class:`RecordError`), never taken for a bad line: moving it to quarantine, or
    running its cell again, would misread a newer run."""
    return _refused(path, number, decode(raw))


def _refused(path: Path, number: int, found: _Judged) -> _Judged:
    if isinstance(found, Skip) and found.kind == UNKNOWN:
        raise RecordError(f"{path} line {number}: {found.reason}")
    return found


def scan(run_dir: Path, live: Callable[[Path], bool] = lambda p: False) -> Scan:
    """Read every records file, each line judged as :func:`~limbo.log.reader.decode` judges it
    but without building the record (:func:`~limbo.log.quick.glance`). A file for which ``live`` says another writer may be appending
    right now has its unterminated last line ignored (it is being written), not reported."""
    paths = record_files(run_dir)
    out = Scan(read=_stood(paths))
    first: dict[str, tuple[str, int]] = {}  # where each id was first seen: (file name, line)
    for path in paths:
        name = path.name
        stats = out.files.setdefault(name, FileStats())
        for spot, glanced in judged(path, glance):
            if spot.torn and live(path):
                continue  # being written
            found = _refused(path, spot.number, glanced)
            if not isinstance(found, Skip) and found.episode_id in out.ids:
                where, number = first[found.episode_id]
                found = Skip("duplicate", f"duplicate of {where} line {number}")
            if isinstance(found, Skip):
                out.bad.append(BadLine(path, spot.number, found.reason, spot.line(),
                                       spot.torn))
                stats.bad += 1
                continue
            _count(out, found, path, spot.number)
            first[found.episode_id] = (name, spot.number)
            stats.records += 1
    return out



def _stood(paths: list[Path]) -> tuple[tuple[str, int, int, int], ...]:
    found = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):  # gone since it was listed
            st = path.stat()
            found.append((path.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(found)


def _count(out: Scan, record: Glance, path: Path, number: int) -> None:
    out.ids.add(record.episode_id)
    term = record.termination
    out.terminations[term] += 1
    if term in RETRYABLE:
        out.errored[record.episode_id] = Errored(term, record.reason, str(record.model), path,
                                                 number)
    out.rated += rated(record.fault_fired, term)


def iter_records(run_dir: Path) -> Iterator[EpisodeRecord]:
    """Every valid record of every records file, each episode once (bad lines skipped)."""
    seen: set[str] = set()
    for path in record_files(run_dir):
        for line in lines(path):
            found = _parse(path, line.number, line.raw)
            if not isinstance(found, Skip) and found["episode_id"] not in seen:
                seen.add(found["episode_id"])
                yield found


def iter_tallied(run_dir: Path) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Where each record :func:`iter_records` yields is (file and line), in its order, and the
    cell and outcome the run's summary counts of it, read without building the whole record
    (:func:`tallied_line`)."""
    seen: set[str] = set()
    for path in record_files(run_dir):
        for line in lines(path):
            found = _refused(path, line.number, tallied_line(line.raw))
            if not isinstance(found, Skip) and found[0] not in seen:
                seen.add(found[0])
                yield f"{path.name} line {line.number}", found[1], found[2]


def find_record(run_dir: Path, episode_id: str) -> EpisodeRecord:
    """One stored record, checked against the whole shape (:func:`limbo.log.reader.validate`);
    :class:`UsageError` when the directory or id is unknown or the record is not valid."""
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    for record in iter_records(run_dir):
        if record["episode_id"] == episode_id:
            return validate(record, f"episode {episode_id} in {run_dir}")
    needle = f'"episode_id": "{episode_id}"'.encode()
    for bad in scan(run_dir).bad:
        if needle in bad.raw:
            raise RecordError(f"episode {episode_id} in {run_dir} is not a valid record "
                              f"({bad.describe()}); limbo status lists such lines")
    raise UsageError(f"episode {episode_id} is not in {run_dir}")


def temp_name(path: Path) -> Path:
    """The temporary sibling of ``path`` (hidden, and never matching ``episodes*.jsonl``). One
    writer per file means one fixed name suffices, and a stale one is simply replaced."""
    return path.with_name(f".{path.name}.tmp")


# ------------------------------------------------------------------ appending


class RecordWriter:
    """Appends records to one file, one ``write`` per record. A write that fails (a full
    disk) is cut back off the file, so the file never ends in half a record we wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {path} for writing: {exc.strerror}") from None
        self.size = os.fstat(self.fd).st_size

    def write(self, line: bytes) -> None:
        done = 0
        try:
            while done < len(line):
                done += os.write(self.fd, line[done:])
        except BaseException as exc:  # a full disk, or Ctrl-C between two partial writes
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, self.size)
            if isinstance(exc, OSError):
                raise StoreError(f"cannot write {self.path}: {exc.strerror}") from None
            raise
        self.size += done

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self.fd)
        os.close(self.fd)


class Reserve:
    """A little disk space held back: released when a write fails for lack of space, so that
    the manifest can still say the run failed."""

    def __init__(self, run_dir: Path, tag: str) -> None:
        self.path = run_dir / f".reserve.{tag}"
        try:
            with self.path.open("wb") as fh:
                fh.write(b"\0" * RESERVE_BYTES)
        except OSError as exc:
            self.release()
            raise StoreError(f"cannot write in {run_dir}: {exc.strerror}") from None

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


# ------------------------------------------------------------------ manifests


def manifest_file(run_dir: Path, shard: tuple[int, int] | None) -> Path:
    """Each shard has its own manifest, so shards running at once never overwrite each other."""
    if shard is None:
        return run_dir / "manifest.json"
    return run_dir / f"manifest.shard-{shard[0]}-of-{shard[1]}.json"


GRID, MCP = "grid", "mcp"
"""The kinds of run directory: a grid's (``limbo run``), or episodes served by ``limbo mcp``."""


def kind_of(manifest: dict[str, Any]) -> str:
    """A manifest's kind, also for manifests written before the field existed."""
    kind = manifest.get("kind")
    if isinstance(kind, str):
        return kind
    if manifest.get("command") == "limbo mcp":
        return MCP
    return GRID


def manifests(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every manifest in ``run_dir`` by file name; :class:`UsageError` for one that is not a
    readable JSON object (it names what to move away)."""
    found = {}
    for path in sorted(run_dir.glob("manifest*.json")):
        found[path.name] = read_manifest(path)
    return found


def read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path} is not a file; move it out of the run directory")
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable manifest ({exc}); move it out of the run "
                         f"directory") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} is not a manifest (a JSON {type(value).__name__}); move it away")
    return value


def write_manifest(path: Path, manifest: dict[str, Any],
                   scrub: Callable[[str], str] = lambda s: s) -> None:
    """Write a manifest atomically (a reader never sees half of it); a failed write leaves no
    temporary file."""
    tmp = temp_name(path)
    try:
        tmp.write_text(scrub(json.dumps(manifest, indent=2, ensure_ascii=False)) + "\n",
                       encoding="utf-8", errors="backslashreplace")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {exc.strerror}") from None
