"""Moving lines out of a run's records files, without ever losing or double-counting one.

Two reasons to move a line aside, one procedure:

- **quarantine** — a line that is not a valid record (torn by a kill, not UTF-8, a duplicate,
  ...) goes to ``quarantine.jsonl`` with its file, line number, reason and raw bytes; its cell
  runs again;
- **supersede** — the record of a cell that ``limbo run --retry-errors`` runs again (it ended
  in ``infra_error`` or ``model_error``, or ``timeout`` when asked) goes to
  ``superseded.jsonl``, byte for byte as it was: the history of the attempt, itself a valid
  records file (``limbo tables RUN/superseded.jsonl`` reads it when named), which no reader of
  the run counts, since readers take only ``episodes*.jsonl``.

The procedure, under the run's writer lock: first the lines are appended to their destination
and synced, then each records file is rewritten without them (temporary file, sync, rename).
A kill between the two steps leaves a line in both files — harmless: readers read only the
records files, so the record still counts once, and the next run moves it again (the
destination, which nobody counts, then holds it twice). A kill before the first step ends
leaves the records files as they were.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from limbo.base.runtime import now_iso
from limbo.log.reader import lines
from limbo.log.store import QUARANTINE, SUPERSEDED, BadLine, Errored, StoreError, temp_name


def quarantine(run_dir: Path, bad: list[BadLine]) -> None:
    """Move ``bad`` lines out of their files into ``quarantine.jsonl``."""
    if not bad:
        return
    _append(run_dir / QUARANTINE, (_entry(b) for b in bad), f"quarantine {len(bad)} bad line(s)")
    _rewrite(_by_file((b.path, b.line) for b in bad), "quarantine bad lines")


def supersede(run_dir: Path, errored: list[Errored]) -> None:
    """Move the records of ``errored`` cells, as they are, into ``superseded.jsonl``."""
    if not errored:
        return
    by_file = _by_file((e.path, e.line) for e in errored)
    _append(run_dir / SUPERSEDED, _raw(by_file), f"set aside {len(errored)} errored record(s)")
    _rewrite(by_file, "set aside errored records")


def _by_file(where: Iterable[tuple[Path, int]]) -> dict[Path, set[int]]:
    found: dict[Path, set[int]] = {}
    for path, number in where:
        found.setdefault(path, set()).add(number)
    return found


def _raw(by_file: dict[Path, set[int]]) -> Iterator[bytes]:
    """The lines themselves, read as they are (streamed: a record can be large)."""
    for path, numbers in by_file.items():
        for line in lines(path):
            if line.number in numbers:
                yield line.raw + b"\n" if line.torn else line.raw


def _append(target: Path, chunks: Iterable[bytes], what: str) -> None:
    try:
        with target.open("ab") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise StoreError(f"cannot write {target} to {what}: {exc.strerror}") from None


def _entry(b: BadLine) -> bytes:
    entry = {"file": b.path.name, "line": b.line, "reason": b.reason, "quarantined_at": now_iso(),
             "raw_base64": base64.b64encode(b.raw).decode("ascii"),
             "preview": b.raw[:200].decode("utf-8", "replace")}
    return json.dumps(entry, ensure_ascii=True).encode("ascii") + b"\n"


def _rewrite(by_file: dict[Path, set[int]], why: str) -> None:
    for path, numbers in by_file.items():
        _rewrite_without(path, numbers, why)


def _rewrite_without(path: Path, numbers: set[int], why: str) -> None:
    tmp = temp_name(path)
    try:
        with tmp.open("wb") as out:
            for line in lines(path):
                if line.number not in numbers:
                    out.write(line.raw)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a temporary name taken by a directory stays
            tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot rewrite {path} to {why}: {exc.strerror}") from None
