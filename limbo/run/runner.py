"""Run many cells into a run directory: resumable, sharded, parallel, budgeted.

Each cell runs exactly once per run directory: the run takes the directory's writer lock for its
shard (:mod:`limbo.log.runlock`), checks that the directory holds the same grid (the fingerprint in
its manifests, :mod:`limbo.run.plan`), moves lines that are not valid records aside
(:func:`limbo.log.moves.quarantine`), sets aside the errored records it was asked to retry
(:func:`limbo.log.moves.supersede`), and runs the cells not yet recorded. The same command re-run
after a kill picks up where it stopped. Records are written as each episode ends
(:mod:`limbo.run.local`) and never accumulated in memory.

The manifest's ``status`` says how the last pass ended: ``running`` (or a writer died — see
``limbo status``), ``complete``, ``stopped`` (the budget), ``interrupted`` (Ctrl-C) or
``failed`` (a full disk, a worker that died, a bug), with ``stop_reason``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from limbo import __version__
from limbo.base.errors import UsageError
from limbo.base.runtime import host_facts, now_iso, stopwatch
from limbo.base.secrets import scrubber
from limbo.log.errored import ERROR_TERMINATIONS
from limbo.log.moves import quarantine, supersede
from limbo.log.runlock import WriterLock
from limbo.log.store import (
    GRID,
    BadLine,
    RecordWriter,
    Reserve,
    Scan,
    StoreError,
    episodes_file,
    iter_tallied,
    kind_of,
    manifest_file,
    manifests,
    read_manifest,
    record_files,
    scan,
    temp_name,
    write_manifest,
)
from limbo.run.breaker import Breaker
from limbo.run.budget import Budget
from limbo.run.context import Executor, RunContext
from limbo.run.plan import Plan, plan
from limbo.run.precision import Precision
from limbo.run.summary import Summary
from limbo.run.tally import PassTally, Round, wanted
from limbo.sim.cell import Cell

Notice = Callable[[str], None]


EXECUTORS = ("local", "ray")
"""Where a run's episodes run (``limbo run --executor``)."""


@dataclass
class RunResult:
    summary: Summary
    ran: int
    skipped: int
    """Cells of this shard already recorded before this pass."""
    left: int
    """Cells of this shard still to run after this pass (``--limit``, the budget, a stop)."""
    stopped: str | None
    wall_s: float
    retried: int = 0
    """Errored cells of this shard whose records were set aside to run them again."""
    errored: int = 0
    """Cells of this shard whose record ended in an error (``infra_error``, ``model_error``)
    after this pass: the run is not complete until they run again."""
    stopped_by: str | None = None
    """What stopped the pass early: ``budget`` (``--max-cost``) or ``errors`` (the same
    provider failure again and again, :mod:`limbo.run.breaker`)."""
    responses: tuple[int, int] = (0, 0)
    """The pass's model turns: answered by the provider, and replayed from the cache."""


class RunDir:
    """An open run directory: this writer's lock, the records scan, its records file."""

    def __init__(self, out: Path, shard: tuple[int, int] | None) -> None:
        self.out, self.shard = out, shard
        self.lock = WriterLock(out, shard)
        self.records = episodes_file(out, shard)
        self.manifest = manifest_file(out, shard)
        self.reserve: Reserve | None = None
        self.writer: RecordWriter | None = None
        self.scan = Scan()
        self.retried = 0
        """Errored cells whose records :meth:`open` set aside to run them again."""

    def open(self, the_plan: Plan, name: str, notice: Notice,
             retry: tuple[str, ...] = (), scanned: Scan | None = None) -> None:
        """Take the directory: its lock, a scan of its records (``scanned``, the one the caller
        made before the lock, when :meth:`_unchanged`: a second scan of the paper run is
        0.7 s), the repairs, its records file."""
        _make_dir(self.out)
        for path in (self.records, self.manifest):
            if path.exists() and not path.is_file():
                raise UsageError(f"{path} is not a regular file; move it out of the run directory")
        _grid_kind(self.out)  # before the lock too: a refused directory gains no lock file
        self.lock.acquire()
        try:
            _same_grid(self.out, the_plan, name)
            for path in (temp_name(self.records), temp_name(self.manifest)):
                path.unlink(missing_ok=True)  # left by a writer of this claim that was killed
            self.scan = (scanned if scanned is not None and self._unchanged(scanned)
                         else scan(self.out, live=self._live))
            self._repair(notice)
            self.retried = self._supersede(retry, the_plan.mine)  # before the file is opened
            self.reserve = Reserve(self.out, self.lock.claim.tag)
            self.writer = RecordWriter(self.records)
        except BaseException:
            self.close()
            raise

    def _unchanged(self, scanned: Scan) -> bool:
        """Whether ``scanned`` reads the directory as this writer would now: no records file
        changed since, and no other shard's file to read as live (a scan without a shard
        reports their torn last lines, which this writer leaves to their own writers)."""
        return self.shard is None and scanned.still(self.out)

    def _owns(self, path: Path) -> bool:
        """Whether no other writer can be appending to ``path`` while we hold our claim."""
        return self.shard is None or path == self.records

    def _live(self, path: Path) -> bool:
        return not self._owns(path)

    def _repair(self, notice: Notice) -> None:
        mine = [b for b in self.scan.bad if self._owns(b.path)]
        quarantine(self.out, mine)
        told = [_told(b) for b in mine]
        told += [f"{b.describe()}: not counted as done; the writer of that shard will "
                 f"quarantine it (see limbo status)" for b in self.scan.bad if not self._owns(b.path)]
        for text in told[:MAX_NOTICES]:
            notice(text)
        if len(told) > MAX_NOTICES:
            notice(f"... and {len(told) - MAX_NOTICES} more such lines (see quarantine.jsonl "
                   f"and limbo status)")

    def _supersede(self, terminations: tuple[str, ...], mine: tuple[str, ...]) -> int:
        """Set aside the records of this shard's cells that ended in ``terminations`` (in the
        files this writer owns), so that they run again; how many."""
        if not terminations:
            return 0
        ours = set(mine)
        errored = {i: e for i, e in self.scan.errored.items()
                   if e.termination in terminations and i in ours and self._owns(e.path)}
        supersede(self.out, list(errored.values()))
        for episode in errored:
            self.scan.ids.discard(episode)
            del self.scan.errored[episode]
        return len(errored)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.reserve is not None:
            self.reserve.release()
            self.reserve = None
        self.lock.release()


MAX_NOTICES = 20


def _told(bad: BadLine) -> str:
    if bad.torn:
        return (f"repaired a torn last line ({len(bad.raw)} bytes) left by an interrupted run "
                f"in {bad.path.name}; moved to quarantine.jsonl")
    return f"quarantined {bad.describe()} → quarantine.jsonl; its cell runs again"


def _make_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc.strerror}") from None


def _grid_kind(out: Path) -> None:
    """``out`` holds no run of another kind (``limbo mcp``'s episodes)."""
    for file, manifest in manifests(out).items():
        if kind_of(manifest) != GRID:
            raise UsageError(f"{out} holds episodes of `{manifest.get('command') or kind_of(manifest)}` "
                             f"({file}), not a grid's run; choose another --out")


def _same_grid(out: Path, the_plan: Plan, name: str) -> None:
    _grid_kind(out)
    for file, manifest in manifests(out).items():
        theirs = manifest.get("fingerprint")
        if theirs is not None and theirs != the_plan.fingerprint:
            grid = (manifest.get("grid") or {}).get("name", "?")
            raise UsageError(
                f"{out} holds another grid: {grid!r} ({manifest.get('grid_cells', '?')} cells, "
                f"fingerprint {str(theirs)[:16]}…, from {file}); this run is grid {name!r} "
                f"({the_plan.total} cells, fingerprint {the_plan.fingerprint[:16]}…). Use "
                f"another --out, or the same grid and flags as before")


def local_executor(workers: int) -> Executor:
    """The executor of ``--workers``: this process, or forked ones."""
    from limbo.run.forked import Forked
    from limbo.run.local import InProcess

    return Forked() if workers > 1 else InProcess()


def run_cells(cells: Iterable[Cell], ctx: RunContext, manifest: dict[str, Any],
              on_result: Callable[[int, int, Summary], None] | None = None,
              notice: Notice = lambda text: None, the_plan: Plan | None = None,
              schedule: Precision | None = None, scanned: Scan | None = None) -> RunResult:
    """Run every cell of ``cells`` (iterable more than once) not yet recorded in ``ctx.out``,
    on ``ctx.executor`` (made here, and closed, when the context names none) — or, with a
    ``schedule`` (``--precision``), the cells it picks, round by round. ``scanned``: the
    caller's scan of ``ctx.out``, used again if nothing changed (:meth:`RunDir.open`)."""
    started = stopwatch()
    the_plan = the_plan or plan(cells, ctx.shard)
    run = RunDir(ctx.out, ctx.shard)
    run.open(the_plan, (manifest.get("grid") or {}).get("name", "?"), notice, ctx.retry, scanned)
    own = ctx.executor is None
    executor = ctx.executor or local_executor(ctx.workers)
    try:
        return _run(cells, ctx, executor, manifest, the_plan, run, on_result, notice, started,
                    schedule)
    finally:
        run.close()
        if own:
            executor.close()


def _run(cells: Iterable[Cell], ctx: RunContext, executor: Executor, manifest: dict[str, Any],
         the_plan: Plan, run: RunDir, on_result: Callable[[int, int, Summary], None] | None,
         notice: Notice, started: float, schedule: Precision | None = None) -> RunResult:
    assert run.writer is not None
    retried = run.retried
    pending = [i for i in the_plan.mine if i not in run.scan.ids
               and (ctx.only is None or i in ctx.only)]
    todo = pending if ctx.limit is None else pending[:ctx.limit]
    skipped = sum(1 for i in the_plan.mine if i in run.scan.ids)
    ctx = replace(ctx, workers=_workers(ctx.workers, len(todo), notice))
    base = {**_manifest(run, manifest, the_plan, skipped, len(todo)), "retried": retried}
    write_manifest(run.manifest, base, scrubber())
    fds = [run.writer.fd, *([run.lock.fd] if run.lock.fd is not None else [])]
    tally = PassTally(run.writer, len(todo), fds, on_result, Breaker(ctx.error_streak),
                   schedule.observe if schedule is not None else None)
    budget = None if ctx.max_cost is None else executor.budget(ctx.max_cost)
    status, reason, by = "complete", None, None
    try:
        _drive(cells, ctx, executor, budget, tally, todo, schedule,
               set(the_plan.mine) - set(pending))
    except BaseException as exc:
        _fail(run, base, tally, exc)
        raise
    short = tally.ran < len(todo) if schedule is None else schedule.stopped is not None
    if short and tally.breaker.tripped is not None:
        status, reason, by = "stopped", tally.breaker.tripped, "errors"
    elif short and ctx.max_cost is not None:
        status, reason, by = ("stopped", f"--max-cost {ctx.max_cost} would be exceeded by the "
                                         f"next episode", "budget")
    told = reason  # the run's summary says why a pass stopped early; --limit was asked for
    if status == "complete" and len(todo) < len(pending):
        status, reason = "stopped", f"--limit {ctx.limit}"
    limits = executor.limits()
    actual = {**tally.summary.total.actual(), "wall_s": round(stopwatch() - started, 3)}
    write_manifest(run.manifest, {**base, "status": status, "stop_reason": reason,
                                  "ended_at": now_iso(), "ran": tally.ran,
                                  **({"actual": actual} if "forecast" in base else {}),
                                  **({"limiter": limits} if limits else {}),
                                  **(schedule.facts() if schedule is not None else {})}, scrubber())
    summary = tally.summary
    if skipped:  # a resumed run: summarise everything recorded, not this pass
        summary = Summary.of(iter_tallied(ctx.out))
    left = len(pending) - tally.ran if schedule is None else schedule.unfinished()
    return RunResult(summary, tally.ran, skipped, left, told,
                     stopwatch() - started, retried, _errored_before(run, the_plan)
                     + tally.summary.errors.count(), by,
                     (tally.summary.total.responses, tally.summary.total.cached))


def _drive(cells: Iterable[Cell], ctx: RunContext, executor: Executor, budget: Budget | None,
           tally: PassTally, todo: list[str], schedule: Precision | None,
           recorded: set[str]) -> None:
    """Hand the pass's cells to the executor: all at once, or a ``--precision`` schedule's
    rounds (which first read the results already ``recorded``); the error streak halts both."""
    if schedule is None:
        executor.run(wanted(cells, set(todo), tally.halted), ctx, budget, tally)
        return
    schedule.read(record_files(ctx.out), recorded)
    schedule.drive(lambda batch: executor.run(
        wanted(batch, {c.episode_id for c in batch}, tally.halted), ctx, budget,
        Round(tally, len(batch))), ctx.limit)
    if tally.halted():
        schedule.stopped = tally.breaker.tripped


def _errored_before(run: RunDir, the_plan: Plan) -> int:
    """This shard's cells whose record, kept from an earlier pass, ended in an error."""
    if not run.scan.errored:
        return 0
    mine = set(the_plan.mine)
    return sum(1 for episode, e in run.scan.errored.items()
               if e.termination in ERROR_TERMINATIONS and episode in mine)


def _workers(asked: int, todo: int, notice: Notice) -> int:
    """``--workers`` capped at the cells to run and at four per core."""
    cap = 4 * (os.cpu_count() or 1)
    if asked > cap:
        notice(f"--workers {asked} capped at {cap} (four per core on this machine)")
        asked = cap
    if 1 < todo < asked:
        notice(f"--workers {asked} capped at {todo} (the cells to run)")
        asked = todo
    return asked


def _manifest(run: RunDir, manifest: dict[str, Any], the_plan: Plan, skipped: int,
              todo: int) -> dict[str, Any]:
    first: dict[str, Any] = {}
    if run.manifest.exists():
        first = read_manifest(run.manifest)
    return {"kind": GRID, **manifest, "version": __version__, "fingerprint": the_plan.fingerprint,
            "grid_cells": the_plan.total, "shard": list(run.shard) if run.shard else None,
            "started_at": first.get("started_at") or now_iso(),
            "resumed_at": now_iso() if first.get("started_at") else None, **host_facts(),
            "cells": len(the_plan.mine), "already_done": skipped, "to_run": todo,
            "quarantined": len(run.scan.bad),
            **({"records_offset": _size(run.records)} if "forecast" in manifest else {}),
            "status": "running", "stop_reason": None,
            "ended_at": None, "ran": 0}


def _size(path: Path) -> int:
    """Where this pass's records start in its records file: ``limbo status`` reads what a pass
    that forecast its spending (``forecast`` in its manifest, :mod:`limbo.run.forecast`) has
    spent so far from there, and the pass records what it spent in the end (``actual``)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _fail(run: RunDir, base: dict[str, Any], tally: PassTally, exc: BaseException) -> None:
    """Say in the manifest how the run ended; on a full disk, first free the reserve."""
    if run.reserve is not None and isinstance(exc, StoreError):
        run.reserve.release()
    status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
    reason = "interrupted (Ctrl-C)" if status == "interrupted" else f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(StoreError):
        write_manifest(run.manifest, {**base, "status": status, "stop_reason": reason,
                                      "ended_at": now_iso(), "ran": tally.ran}, scrubber())

