"""Run many cells into a run directory: resumable, sharded, parallel, budgeted.

Each cell runs exactly once per run directory: ids already recorded are skipped, so the same
command re-run after a kill picks up where it stopped. Reference-policy grids are CPU-bound and
use process workers; model grids are I/O-bound and use asyncio concurrency. Records are written
as they arrive and never accumulated in memory.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from limbo import __version__
from limbo.cell import Cell
from limbo.episode import arun_episode
from limbo.hashing import digest
from limbo.runtime import host_facts, now_iso, stopwatch
from limbo.store import (
    Writer,
    done_ids,
    dumps,
    episodes_file,
    iter_records,
    manifest_file,
    read_manifest,
    write_manifest,
)
from limbo.summary import Summary

CHUNK = 64


@dataclass
class RunOptions:
    out: Path
    workers: int = 1
    concurrency: int = 1
    limit: int | None = None
    shard: tuple[int, int] | None = None
    max_cost: float | None = None
    plugins: list[str] = field(default_factory=list)


def in_shard(episode_id: str, shard: tuple[int, int] | None) -> bool:
    """Deterministic partition of cells over ``N`` shards by their id."""
    if shard is None:
        return True
    index, count = shard
    return int(digest(episode_id, 8), 16) % count == index - 1


def _light(record: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    return dumps(record), record["cell"], record["outcome"]


async def _run_many(cells: list[Cell], concurrency: int) -> list[tuple[str, dict, dict]]:
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(cell: Cell) -> tuple[str, dict, dict]:
        async with sem:
            return _light(await arun_episode(cell))

    return list(await asyncio.gather(*(one(c) for c in cells)))


def _worker(payload: tuple[list[Cell], list[str]]) -> list[tuple[str, dict, dict]]:
    cells, plugins = payload
    from limbo.registry import load_plugin

    for plugin in plugins:
        load_plugin(plugin)
    return asyncio.run(_run_many(cells, 1))


def _chunks(cells: list[Cell], size: int) -> Iterator[list[Cell]]:
    for i in range(0, len(cells), size):
        yield cells[i:i + size]


def _results(todo: list[Cell], opts: RunOptions,
             over_budget: Callable[[int], bool]) -> Iterable[tuple[str, dict, dict]]:
    if opts.max_cost is not None:
        # Spend-bounded: never more than `concurrency` episodes in flight, and the budget is
        # checked before each group starts, so a stop never discards paid-for episodes.
        for chunk in _chunks(todo, max(1, opts.concurrency)):
            if over_budget(len(chunk)):
                return
            yield from asyncio.run(_run_many(chunk, opts.concurrency))
        return
    if opts.workers <= 1:
        for chunk in _chunks(todo, max(CHUNK, opts.concurrency)):
            yield from asyncio.run(_run_many(chunk, opts.concurrency))
        return
    method = "fork" if sys.platform == "linux" else "spawn"
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(opts.workers) as pool:
        payloads = ((chunk, opts.plugins) for chunk in _chunks(todo, CHUNK))
        for batch in pool.imap(_worker, payloads):
            yield from batch


@dataclass
class RunResult:
    summary: Summary
    ran: int
    skipped: int
    torn_bytes: int
    stopped: str | None
    wall_s: float


def run_cells(cells: list[Cell], opts: RunOptions, manifest: dict[str, Any],
              on_result: Callable[[int, int, Summary], None] | None = None) -> RunResult:
    """Run every cell of ``cells`` not yet recorded in ``opts.out``."""
    started = stopwatch()
    opts.out.mkdir(parents=True, exist_ok=True)
    writer = Writer(episodes_file(opts.out, opts.shard))
    mine = [c for c in cells if in_shard(c.episode_id, opts.shard)]
    done = done_ids(opts.out)
    todo = [c for c in mine if c.episode_id not in done]
    if opts.limit is not None:
        todo = todo[:opts.limit]
    mpath = manifest_file(opts.out, opts.shard)
    first = (read_manifest(mpath) or {}).get("started_at")
    base = {**manifest, "version": __version__, "started_at": first or now_iso(),
            "resumed_at": now_iso() if first else None, **host_facts(), "cells": len(mine),
            "already_done": len(mine) - len(todo), "status": "running"}
    write_manifest(mpath, base)
    summary, ran, stopped = Summary(), 0, None

    def over_budget(starting: int) -> bool:
        spent = summary.total.cost
        return spent + starting * spent / max(ran, 1) > float(opts.max_cost or 0)

    try:
        for line, cell, outcome in _results(todo, opts, over_budget):
            writer.write_line(line)
            summary.add(cell, outcome)
            ran += 1
            if on_result is not None:
                on_result(ran, len(todo), summary)
    except BaseException as exc:
        write_manifest(mpath, {**base, "status": "failed", "ended_at": now_iso(), "ran": ran,
                                  "stop_reason": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        writer.close()
    if ran < len(todo) and opts.max_cost is not None:
        stopped = f"--max-cost {opts.max_cost} would be exceeded by the next episode"
    status = "stopped" if stopped else "complete"
    write_manifest(mpath, {**base, "status": status, "stop_reason": stopped,
                              "ended_at": now_iso(), "ran": ran, "torn_bytes": writer.torn})
    if len(mine) > len(todo):  # a resumed run: summarise everything recorded, not this pass
        summary = Summary.of(iter_records(opts.out))
    return RunResult(summary, ran, len(mine) - len(todo), writer.torn, stopped,
                     stopwatch() - started)
