"""LIMBO records out of Inspect logs.

Each sample of a LIMBO task carries its whole episode record in its metadata, so an Inspect log
(``.eval``, or Inspect's ``.json`` format) is one more container of records: the analysis
loader reads it as the JSONL those records would make (:func:`jsonl`), ``limbo show`` finds one
episode in it, and :func:`write_run` turns it into an ordinary run directory.

A sample without a record (it errored inside Inspect before the episode could finish, or the
log is still being written) is reported with its id and Inspect's error, never skipped silently.
"""

from __future__ import annotations

import functools
import importlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.log.reader import Skip, decode, lines
from limbo.log.records import EpisodeRecord
from limbo.log.store import RecordWriter, dumps, episodes_file, write_manifest

RECORD_KEY = "limbo_record"
"""Sample metadata key: the episode record (schema ``limbo.episode/1``), once the sample ran."""
DESIGN_KEY = "limbo_design"
"""The eval's metadata key holding the run's design (:mod:`limbo.experiments.design`)."""
EXTRA_HINT = "pip install 'limbo-bench[inspect]'"

SKIPPED_FIELDS = frozenset({"messages", "events", "store", "attachments"})
"""Sample fields a record does not need: not decoded (for ``.eval`` logs)."""


def require_inspect() -> Any:
    """The ``inspect_ai`` module; a :class:`UsageError` naming the extra when it is absent."""
    try:
        return importlib.import_module("inspect_ai")
    except ImportError:
        raise UsageError(f"Inspect AI is not installed; {EXTRA_HINT}") from None


def is_inspect_log(path: Path) -> bool:
    """An ``.eval`` file, or a ``.json`` file that is not LIMBO's own JSONL."""
    if path.suffix == ".eval":
        return True
    if path.suffix != ".json" or not path.is_file():
        return False
    with path.open("rb") as fh:
        return not fh.read(16).lstrip().startswith(b'{"schema"')


@dataclass(frozen=True)
class Extracted:
    """The records of one Inspect log as JSONL bytes, and the samples that had none."""

    data: bytes
    missing: tuple[tuple[str, str], ...]
    """(``log#sample id``, why) for each sample without a record."""


def jsonl(path: Path) -> Extracted:
    """The records of the Inspect log at ``path`` (cached while the file is unchanged)."""
    stat = path.stat()
    return _extract(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _extract(path: str, mtime_ns: int, size: int) -> Extracted:
    lines: list[bytes] = []
    missing: list[tuple[str, str]] = []
    for sample in _samples(Path(path)):
        record = (sample.metadata or {}).get(RECORD_KEY)
        where = f"{path}#{sample.id}" + (f"@epoch{sample.epoch}" if sample.epoch != 1 else "")
        if isinstance(record, dict):
            lines.append((dumps(record) + "\n").encode("utf-8"))
        else:
            error = sample.error.message.splitlines()[0][:200] if sample.error else None
            missing.append((where, error or "the sample carries no LIMBO record"))
    return Extracted(b"".join(lines), tuple(missing))


def _samples(path: Path) -> Iterator[Any]:
    require_inspect()
    from inspect_ai.log import read_eval_log_samples

    try:
        yield from read_eval_log_samples(path, all_samples_required=False,
                                         exclude_fields=set(SKIPPED_FIELDS))
    except Exception as exc:  # noqa: BLE001 - any reader failure is a bad input file
        raise UsageError(f"{path} is not a readable Inspect log: {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from None


def design(path: Path) -> dict[str, Any] | None:
    """The design the LIMBO task wrote into the log's metadata (``None``: a log without one)."""
    require_inspect()
    from inspect_ai.log import read_eval_log

    try:
        found = (read_eval_log(path, header_only=True).eval.metadata or {}).get(DESIGN_KEY)
    except Exception:  # noqa: BLE001 - a log whose header cannot be read has no design
        return None
    return found if isinstance(found, dict) else None


def records(path: Path) -> Iterator[EpisodeRecord]:
    """Every episode record in the Inspect log at ``path``, read by the one reader (a sample
    whose record is not one is skipped, as in a records file)."""
    for line in lines(io.BytesIO(jsonl(path).data)):
        found = decode(line.raw)
        if not isinstance(found, Skip):
            yield found


def find(path: Path, episode_id: str) -> EpisodeRecord:
    """One record of the log; :class:`UsageError` when the id is not in it."""
    for record in records(path):
        if record.get("episode_id") == episode_id:
            return record
    raise UsageError(f"episode {episode_id} is not in {path}")


def write_run(path: Path, run_dir: Path) -> int:
    """Write the log's records as a LIMBO run directory (``episodes.jsonl`` and a manifest
    naming the log); returns how many records were written. Refuses a directory that already
    holds records, so nothing is counted twice."""
    extracted = jsonl(path)
    target = episodes_file(run_dir, None)
    if target.exists() and target.stat().st_size:
        raise UsageError(f"{target} already holds records; write to an empty directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    writer = RecordWriter(target)
    try:
        count = 0
        for line in extracted.data.splitlines():
            writer.write(line + b"\n")
            count += 1
    finally:
        writer.close()
    write_manifest(run_dir / "manifest.json", {
        "source": {"inspect_log": str(path), "records": count,
                   "samples_without_record": [list(m) for m in extracted.missing]}})
    return count
