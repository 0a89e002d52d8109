"""Episode logs into one tidy frame: the only place analysis finds record files; their lines
are read and judged by the one reader, :mod:`limbo.log.reader`.

Every table, figure and ``limbo compare`` reads runs through :func:`load`. It takes any mix of
run directories and record files (shards from one machine or several) and returns one row per
episode: every cell factor, every outcome field, the focal write's class, the fault's family
and observation-equivalence group, usage and cost, whether it is rated (:mod:`limbo.log.rated`),
the run it came from and the experiments it belongs to (``exp:NAME`` columns) — the last three
read from each run's recorded design (:mod:`limbo.analysis.runs`), not from today's code.

What it reads: in a directory, only files named ``episodes*.jsonl`` (quarantine files and
anything else a run directory holds are left alone) and Inspect logs (``*.eval``); a file named
on the command line is read whatever its name, plain or gzip-compressed. An Inspect log of a
LIMBO task is read as the JSONL of the records its samples carry (:mod:`limbo.log.inspect_logs`,
the ``inspect`` extra); a sample without one is reported (``no record``). What it refuses to mix
in, each reported with file and line, never silently:

* a line the reader finds ``unparseable`` (empty, torn by a kill, not UTF-8, not a JSON object),
  ``invalid record`` (a termination outside the closed set) or of an ``unknown schema`` (a
  version not in :data:`limbo.log.reader.READABLE`, e.g. one written by a newer LIMBO); a
  record that lacks a field the tables need, or has one of the wrong type, is ``unparseable``
  too; an event of a type outside the closed set stops the reader that meets it with one line
  naming the file and line (events are decoded lazily, not at load);
* the same episode id twice: identical copies (same cell and outcome — runs of overlapping
  grids share cells) are kept once (``duplicate``), belonging to the experiments of every run
  that holds one; copies that disagree are all dropped,
  since nothing says which is right (``conflict``).

The reader's fast path decodes only ``cell`` and ``outcome`` (:func:`limbo.log.reader.parts`)
and the runtime's ``wall_s`` (:func:`limbo.log.reader.wall_of`, the ``wall_s`` column); the
event log is decoded later, lazily, and only for the rows that need it
(:meth:`Loaded.each_events`).
Fault modes no registered plugin defines are reported too (``unregistered fault mode``).
"""

from __future__ import annotations

import contextlib
import gc
import io
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
import pandas as pd

from limbo.analysis.derive import derive
from limbo.analysis.runs import EXPERIMENT, Fallback, Run, Runs, attach, fault_table
from limbo.analysis.schemas import Row, check_types, row_of
from limbo.base.errors import UsageError
from limbo.log.reader import (
    Offsets,
    Parts,
    RecordError,
    Skip,
    events,
    lines,
    open_bytes,
    parts,
    record_of,
    wall_of,
)
from limbo.log.records import CELL_FIELDS, FLAGS, NUMBERS, EpisodeRecord
from limbo.log.store import EPISODES_GLOB

T = TypeVar("T")
RECORD_GLOB = EPISODES_GLOB
INSPECT_GLOB = "*.eval"


@dataclass(frozen=True)
class Problem:
    """One thing in the input that was not loaded as given."""

    kind: str
    """``unparseable``, ``invalid record``, ``unknown schema``, ``duplicate``, ``conflict``,
    ``no records`` or ``unregistered fault mode``; ``no record``: an Inspect sample without an episode record."""
    where: str
    """``file:line`` (or the directory)."""
    detail: str


def record_files(path: Path) -> list[Path]:
    """The record files of a run directory, or ``[path]`` for a file."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"{path} is neither a run directory nor a record file")
    found = [p for p in path.glob(RECORD_GLOB) if p.is_file() and "quarantine" not in p.name]
    return sorted([*found, *(p for p in path.glob(INSPECT_GLOB) if p.is_file())])


@dataclass
class _Seen:
    index: int
    where: str
    parts: tuple[dict[str, Any], dict[str, Any]]
    dropped: bool = False


@dataclass
class Loaded:
    """The frame of every loaded episode and the problems met on the way."""

    frame: pd.DataFrame
    problems: list[Problem]
    files: list[Path]
    runs: list[Run] = field(default_factory=list)
    """The runs the episodes came from, in load order (the frame's ``run`` column indexes
    it), each with its design (:mod:`limbo.analysis.runs`)."""
    shared: list[str] = field(default_factory=list)
    """Lines saying which episodes two runs of different grids (or of one grid under other
    options) both hold, counted once: information, not a problem."""
    _offsets: dict[int, Offsets] = field(default_factory=dict, repr=False, compare=False)

    def fault_table(self) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
        """Mode → (family, group, every family), as the loaded runs recorded them."""
        return fault_table(self.runs)

    def modes_of(self, families: Iterable[str]) -> set[str]:
        """Every mode that counts in one of ``families`` (a late commit is also "read-back
        cannot"), as the loaded runs recorded them."""
        wanted = set(families)
        return {mode for mode, (_, _, fams) in self.fault_table().items() if wanted & set(fams)}

    def counts(self) -> str:
        """One line: episodes loaded, from how many runs, how many rated and errored (by
        termination) — the numbers ``limbo run``'s summary, ``status`` and ``check`` give."""
        frame = self.frame
        errored = frame.loc[frame["error"], "termination"].astype(str).value_counts()
        detail = ", ".join(f"{t} {n}" for t, n in sorted(errored.items()))
        unfired = int((~frame["fault_fired"] & ~frame["error"]).sum())
        return (f"loaded {len(frame)} episodes from {len(self.runs)} run(s): "
                f"{int(frame['rated'].sum())} rated, {int(frame['error'].sum())} errored"
                f"{f' ({detail})' if detail else ''}, {unfired} with the fault not fired")

    def notes(self) -> list[str]:
        """Information about the input that is no problem: cells two runs of different grids
        share (counted once), and runs that hold fewer episodes than their grid has."""
        partial = [f"{run.key}: {_grids(run) or 'records'} run holds "
                   f"{run.partial(int(run.held.sum()))}" for run in self.runs
                   if run.partial(int(run.held.sum()))]
        return [*self.shared, *partial]

    def experiments(self) -> list[str]:
        """The names of the experiments the loaded runs hold."""
        return sorted(c[len(EXPERIMENT):] for c in self.frame.columns
                      if c.startswith(EXPERIMENT))

    def lines(self, rows: pd.DataFrame) -> Iterator[tuple[Any, str, str]]:
        """(index, schema, the record's line) of each row of ``rows`` (a slice of
        :attr:`frame`), read in file order by the offsets the load kept."""
        ordered = rows.sort_values(["file", "offset"])
        index, schemas = ordered.index, ordered["schema"].to_numpy()
        files, offsets, lengths = (ordered[c].to_numpy() for c in ("file", "offset", "length"))
        for start, stop in _adjacent(files, offsets, lengths):
            first = int(offsets[start])
            block = self._bytes(int(files[start]), first,
                                int(offsets[stop - 1] + lengths[stop - 1]) - first)
            for i in range(start, stop):
                at = int(offsets[i]) - first
                yield index[i], schemas[i], block[at:at + int(lengths[i])].decode("utf-8")

    def line(self, file_no: int, offset: int, length: int) -> str:
        """The line at ``offset`` of file ``file_no`` (read by offset: no file is read again
        from its start, whatever the order of the calls)."""
        return self._bytes(file_no, offset, length).decode("utf-8")

    def _bytes(self, file_no: int, offset: int, length: int) -> bytes:
        found = self._offsets.get(file_no)
        if found is None:
            found = self._offsets[file_no] = _offsets(self.files[file_no])
        return found.read(offset, length)

    def records(self, rows: pd.DataFrame) -> Iterator[tuple[Any, EpisodeRecord]]:
        """(index, full record) of each row of ``rows``, in file order."""
        for index, _, text in self.lines(rows):
            yield index, record_of(text)

    def each_events(self, rows: pd.DataFrame,
                    read: Callable[[Any, Iterator[dict[str, Any]]], T]) -> dict[Any, T]:
        """``read(index, events)`` for each row of ``rows`` (a slice of :attr:`frame`), by
        index. Events are decoded as ``read`` consumes them: it pays only for what it reads."""
        out = {}
        for index, _, text in self.lines(rows):
            try:
                out[index] = read(index, events(text))
            except RecordError as exc:
                where = f"{self.files[int(rows.at[index, 'file'])]}:{rows.at[index, 'line']}"
                raise RecordError(f"{where}: {exc}; this LIMBO reads only the event types of "
                                  f"limbo.sim.events") from None
        return out

    def messages(self) -> list[str]:
        """One line per kind of problem: how many, and where the first ones are."""
        by_kind: dict[str, list[Problem]] = {}
        for problem in self.problems:
            by_kind.setdefault(problem.kind, []).append(problem)
        lines = []
        for kind, items in by_kind.items():
            first = "; ".join(f"{p.where} ({p.detail})" for p in items[:3])
            more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
            lines.append(f"{len(items)} {kind}: {first}{more}")
        return lines


def _adjacent(files: Any, offsets: Any, lengths: Any,
              most: int = 256) -> Iterator[tuple[int, int]]:
    """(start, stop) of each run of rows whose lines follow one another in one file, at most
    ``most`` rows (a megabyte or two) each: a run is one read, not one per line — Table 15 reads
    every line of the paper grid, 39,600 system calls that were most of its time."""
    cut = np.flatnonzero((files[1:] != files[:-1])
                         | (offsets[1:] != offsets[:-1] + lengths[:-1])) + 1
    edges = [0, *cut.tolist(), len(files)]
    for begin, end in zip(edges, edges[1:], strict=False):
        for start in range(begin, end, most):
            yield start, min(start + most, end)


class _Builder:
    """Accumulates rows, deduplicating by episode id."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.seen: dict[str, _Seen] = {}
        self.problems: list[Problem] = []
        self.also: list[tuple[str, int]] = []
        """(episode id, file number) of each identical copy counted once."""
        self.copies: list[tuple[str, str, int, int]] = []
        """(where, where first seen, its file, the first one's file) of each identical copy."""

    def add(self, parsed: Parts, where: str, loc: tuple[int, int, int, int],
            wall_s: float) -> None:
        schema, episode_id, cell, outcome = parsed
        try:
            row = row_of(cell, outcome)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self.problems.append(Problem("unparseable", where, f"missing or bad field {exc}"))
            return
        row["episode_id"], row["schema"], row["wall_s"] = episode_id, schema, wall_s
        row["file"], row["line"], row["offset"], row["length"] = loc
        self._keep(row, where, (cell, outcome))

    def _keep(self, row: Row, where: str, parts: tuple[dict[str, Any], dict[str, Any]]) -> None:
        seen = self.seen.get(row["episode_id"])
        if seen is None:
            self.seen[row["episode_id"]] = _Seen(len(self.rows), where, parts)
            self.rows.append(row)
        elif seen.parts == parts:
            self.also.append((row["episode_id"], row["file"]))
            self.copies.append((where, seen.where, row["file"], self.rows[seen.index]["file"]))
        else:
            self.problems.append(Problem("conflict", where, f"{row['episode_id']} differs from "
                                         f"{seen.where}; every copy dropped"))
            seen.dropped = True

    def frame(self) -> pd.DataFrame:
        dropped = {s.index for s in self.seen.values() if s.dropped}
        rows = [r for i, r in enumerate(self.rows) if i not in dropped]
        frame, bad = check_types(pd.DataFrame.from_records(rows, columns=_COLUMNS))
        for episode_id, why in bad:
            self.problems.append(Problem("unparseable", self.seen[episode_id].where, why))
        return derive(frame)


_COLUMNS = ["episode_id", *CELL_FIELDS, *FLAGS, *NUMBERS, "report_status", "termination",
            "idempotency", "read_path", "reversibility", "schema", "wall_s", "file", "line",
            "offset", "length"]


def _read_file(builder: _Builder, path: Path, file_no: int) -> None:
    """Every line of ``path`` through the one reader: a record becomes a row, any other line a
    problem of the reader's kind (``unparseable``, ``invalid record``, ``unknown schema``)."""
    from limbo.log.inspect_logs import is_inspect_log

    for line in lines(_open(path, builder.problems) if is_inspect_log(path) else path):
        where = f"{path}:{line.number}"
        found = parts(line.raw)
        if isinstance(found, Skip):
            builder.problems.append(Problem(found.kind, where, found.reason[:160]))
            continue
        builder.add(found, where, (file_no, line.number, line.offset, len(line.raw)),
                    wall_of(line.raw))


# -- Inspect logs: one more container of records ---------------------------------------------

def _open(path: Path, problems: list[Problem] | None = None) -> IO[bytes]:
    """A record file's bytes: a JSONL file as it is on disk; an Inspect log as the JSONL of the
    records its samples carry, each sample without one added to ``problems``."""
    from limbo.log.inspect_logs import is_inspect_log, jsonl

    if not is_inspect_log(path):
        return open_bytes(path)
    extracted = jsonl(path)
    if problems is not None:
        problems.extend(Problem("no record", where, why) for where, why in extracted.missing)
    return io.BytesIO(extracted.data)


def _offsets(path: Path) -> Offsets:
    """A record file's lines by offset: a JSONL file as it is on disk, an Inspect log as the
    JSONL of its records (see :func:`_open`)."""
    from limbo.log.inspect_logs import is_inspect_log

    return Offsets(_open(path) if is_inspect_log(path) else path)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while records become rows and the rows a frame (a
    row holds no cycle, yet collections walked every row built so far: about half a second of
    the paper run's load), and while the tables are built for ``limbo tables`` or ``limbo
    report`` (0.2 s, to free 2 of 290 MB). It is restored afterwards as the caller had it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _copies(builder: _Builder, runs: list[Run]) -> list[str]:
    """Judge each identical copy: two runs of different grids, or of one grid under other
    options, that both hold a cell (E1's instance 0 is also E6's vanilla arm) is expected —
    one line saying so, returned; any other copy (a run loaded twice, a stray file) is a
    ``duplicate`` problem."""
    run_of = {f: run for run in runs for f in run.files}
    shared: Counter[tuple[str, str]] = Counter()
    for where, first, file_no, first_no in builder.copies:
        a, b = run_of[first_no], run_of[file_no]
        if a is not b and a.recorded and b.recorded and _identity(a) != _identity(b):
            shared[(_grids(a) + a.overridden(), _grids(b) + b.overridden())] += 1
            continue
        builder.problems.append(Problem("duplicate", where, f"also at {first}; identical, "
                                        f"counted once"))
    return [f"{n:,} episode{'s' if n != 1 else ''} held by both the {a} and the {b} run (their "
            f"grids share these cells) counted once, in the experiments of each"
            for (a, b), n in sorted(shared.items())]


def _identity(run: Run) -> tuple[str, object]:
    """What tells two runs apart: their grids and the digest of what those grids ran."""
    return _grids(run), run.design.get("grid_digest")


def _grids(run: Run) -> str:
    """The grids a run with a recorded design holds (``e1+e1s``), or ``""``."""
    return "+".join(e["name"] for e in run.design["experiments"]) if run.recorded else ""


def _consolidated(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its columns of one dtype in one block. Columns added one by one (the
    derived flags, the ``exp:NAME`` masks) are a block each, and every row selection takes
    each block apart: the paper grid's 49 blocks become 23, and a selection costs half."""
    return frame.copy()


def load(paths: Sequence[Path | str], fallback: Fallback | None = None) -> Loaded:
    """Every episode in ``paths`` (run directories and/or record files), deduplicated; input
    that recorded no design is read against ``fallback``'s (:mod:`limbo.analysis.runs`)."""
    if not paths:
        raise UsageError("name at least one run directory or record file")
    builder, runs = _Builder(), Runs(fallback)
    files: list[Path] = []
    with collector_paused():
        for given in map(Path, paths):
            found = record_files(given)
            if not found:
                builder.problems.append(Problem("no records", str(given), f"no {RECORD_GLOB} "
                                                f"in this directory"))
            for path in found:
                if path.resolve() in {f.resolve() for f in files}:
                    continue
                files.append(path)
                runs.add(given, path, len(files) - 1)
                _read_file(builder, path, len(files) - 1)
        frame = builder.frame()
        attach(frame, runs, builder.also)
    shared = _copies(builder, list(runs))
    loaded = Loaded(_consolidated(frame), builder.problems, files, list(runs), shared)
    unknown = loaded.frame.loc[loaded.frame["family"] == "unknown", "fault"]
    if len(unknown):
        modes = ", ".join(sorted(set(map(str, unknown))))
        loaded.problems.append(Problem("unregistered fault mode", modes, f"{len(unknown)} "
                                       f"episodes; no table can place them: load the plugin "
                                       f"that registers the mode with --plugin"))
    loaded.problems += [Problem(*p) for p in runs.problems]
    if loaded.frame.empty:
        detail = "; ".join(loaded.messages()) or "the files are empty"
        raise UsageError(f"no episode records could be loaded from {', '.join(map(str, paths))}"
                         f" ({detail})")
    return loaded


