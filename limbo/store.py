"""The run directory: ``episodes*.jsonl`` (one record per line) and ``manifest.json``.

Records are appended and flushed one by one, so a killed run loses at most the episode in
progress. A torn last line (a write cut by a kill) is detected on opening, reported, and cut
off before anything new is appended; readers skip it. With ``--shard I/N`` each shard writes
its own file and loading reads them all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from limbo.errors import UsageError

EPISODES_GLOB = "episodes*.jsonl"


def episodes_file(run_dir: Path, shard: tuple[int, int] | None) -> Path:
    if shard is None:
        return run_dir / "episodes.jsonl"
    return run_dir / f"episodes.shard-{shard[0]}-of-{shard[1]}.jsonl"


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    offset = 0
    with path.open("rb") as fh:
        for line in fh:
            yield offset, line
            offset += len(line)


def repair(path: Path) -> int:
    """Cut a torn last line off ``path``; returns how many bytes were removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    good = 0
    for offset, line in _lines(path):
        if not line.endswith(b"\n"):
            break
        try:
            json.loads(line)
        except json.JSONDecodeError:
            break
        good = offset + len(line)
    if good < size:
        with path.open("rb+") as fh:
            fh.truncate(good)
    return size - good


def iter_records(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every complete record of every episodes file in ``run_dir`` (torn lines skipped)."""
    for path in sorted(run_dir.glob(EPISODES_GLOB)):
        for _, line in _lines(path):
            if not line.endswith(b"\n"):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def done_ids(run_dir: Path) -> set[str]:
    """Episode ids already recorded in any file of ``run_dir``."""
    ids: set[str] = set()
    for path in sorted(run_dir.glob(EPISODES_GLOB)):
        for _, line in _lines(path):
            if line.endswith(b"\n") and line.startswith(b'{"schema"'):
                start = line.find(b'"episode_id": "')
                if start >= 0:
                    ids.add(line[start + 15:line.find(b'"', start + 15)].decode())
    return ids


def find_record(run_dir: Path, episode_id: str) -> dict[str, Any]:
    """One stored record; :class:`UsageError` when the directory or id is unknown."""
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    for record in iter_records(run_dir):
        if record.get("episode_id") == episode_id:
            return record
    raise UsageError(f"episode {episode_id} is not in {run_dir}")


class Writer:
    """Appends records to one episodes file, flushing after each."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.torn = repair(path)
        self.path = path
        self._fh: TextIO = path.open("a", encoding="utf-8")

    def write_line(self, line: str) -> None:
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def dumps(record: dict[str, Any]) -> str:
    """One record as one JSON line (key order as built; deterministic)."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def manifest_file(run_dir: Path, shard: tuple[int, int] | None) -> Path:
    """Each shard has its own manifest, so shards running at once never overwrite each other."""
    if shard is None:
        return run_dir / "manifest.json"
    return run_dir / f"manifest.shard-{shard[0]}-of-{shard[1]}.json"


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())  # type: ignore[no-any-return]
    except (OSError, json.JSONDecodeError):
        return None


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Write a manifest atomically (a reader never sees half of it; writers never share a
    temporary file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
