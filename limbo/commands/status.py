"""``limbo status RUN_DIR``: the integrity check to run before trusting a run.

It reads the directory without changing it: the manifests (grid identity, shards, how each
last pass ended), the records files (every line parsed: cells done, errored, duplicates, lines
that are not records), the quarantine, and the writer locks (whether a writer holds the
directory now). Exit status 0 means every cell of the grid is recorded exactly once, none ended in an error
(``infra_error``, ``model_error``: :mod:`limbo.log.errored`), nothing is waiting for quarantine and
no writer is running; 1 means something is missing or wrong, and the report says what —
errored cells grouped by reason, with the command that runs them again. A directory of
``limbo mcp`` episodes has no grid: each recorded episode is its cell. Nor has one of
``limbo proxy`` episodes, where an episode its proxy never recorded is missing
(:mod:`limbo.proxy.status`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.words import plural
from limbo.commands import command_parser, run_samples
from limbo.commands.common import console
from limbo.commands.spent import spend_line, spent
from limbo.log.errored import ERROR_TERMINATIONS, TIMEOUT, ErrorGroups, retry_command
from limbo.log.rated import ERRORED
from limbo.log.runlock import active_claims, describe_holder
from limbo.log.store import (
    GRID,
    QUARANTINE,
    SUPERSEDED,
    Scan,
    kind_of,
    manifests,
    record_files,
    scan,
    shard_of,
)
from limbo.proxy import status as proxy_status
from limbo.run.plan import in_shard


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo status`` on the CLI's subparsers."""
    p = command_parser(sub, "status")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory to check")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    return status(args.run_dir, args.json, console())


def report(run_dir: Path) -> dict[str, Any]:
    """Everything ``limbo status`` says, as data."""
    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    found = manifests(run_dir)
    if not found and not record_files(run_dir):
        raise UsageError(f"{run_dir} is not a run directory (no manifest*.json, no "
                         f"episodes*.jsonl)")
    writers = active_claims(run_dir)
    live = {c.shard for c, _ in writers}
    result = scan(run_dir, live=lambda p: shard_of(p) in live and (
        shard_of(p) is not None or p.name == "episodes.jsonl"))
    grids = {m.get("fingerprint"): m for m in found.values() if m.get("fingerprint")}
    total = max((int(m.get("grid_cells") or 0) for m in grids.values()), default=None)
    kinds = sorted({kind_of(m) for m in found.values()})
    if kinds and GRID not in kinds:  # limbo mcp or proxy: every recorded episode is its cell
        total = len(result.ids)
    groups = ErrorGroups()
    for errored in result.errored.values():
        groups.add(errored.termination, errored.reason, errored.model)
    argv = _argv(found)
    proxy = (proxy_status.report(run_dir, result.ids, bool(writers), "conform" in kinds)
             if proxy_status.is_proxy_dir(found, run_dir) else None)
    if proxy is not None and not grids:  # limbo proxy: each episode is its own cell
        total = proxy["cells"]
    precision, unsampled = run_samples.unsampled(found.values(), total, len(result.ids))
    return {
        "run_dir": str(run_dir), "kind": kinds[0] if len(kinds) == 1 else kinds,
        "grids": [{"name": (m.get("grid") or {}).get("name"), "fingerprint": f,
                   "cells": m.get("grid_cells")} for f, m in grids.items()],
        "writers": [describe_holder(note) for _, note in writers],
        "cells": total, "done": len(result.ids), "rated": result.rated,
        "missing": None if total is None else max(0, total - len(result.ids) - unsampled),
        "precision": precision, "unsampled": unsampled,
        "errored": {t: result.terminations[t] for t in ERRORED if result.terminations[t]},
        "errors": groups.to_json(),
        "retry": ({"errors": retry_command(argv, False), "timeouts": retry_command(argv, True)}
                  if GRID in kinds else None),
        "superseded": _count_lines(run_dir / SUPERSEDED),
        "bad_lines": [b.describe() for b in result.bad],
        "quarantined": _count_lines(run_dir / QUARANTINE),
        "files": {name: vars(stats) for name, stats in result.files.items()},
        "passes": [{**_pass(name, m, result), "forecast": m.get("forecast"),
                    "spent": spent(run_dir, m)} for name, m in found.items()],
        "proxy": proxy,
    }


def _argv(found: dict[str, dict[str, Any]]) -> list[str] | None:
    """The command line of the run (the whole directory's manifest first, else a shard's)."""
    for manifest in sorted(found.values(), key=lambda m: m.get("shard") is not None):
        argv = manifest.get("argv")
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return argv
    return None


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as fh:
        return sum(1 for _ in fh)


def _pass(name: str, manifest: dict[str, Any], result: Scan) -> dict[str, Any]:
    raw = manifest.get("shard")
    shard = (int(raw[0]), int(raw[1])) if isinstance(raw, list) and len(raw) == 2 else None
    done = sum(1 for i in result.ids if in_shard(i, shard))
    return {"manifest": name, "kind": kind_of(manifest),
            "shard": f"{shard[0]}/{shard[1]}" if shard else None,
            "cells": manifest.get("cells"), "done": done, "status": manifest.get("status"),
            "stop_reason": manifest.get("stop_reason"), "ran": manifest.get("ran"),
            "last_episode": manifest.get("last_episode")}


def verdict(info: dict[str, Any]) -> tuple[bool, str]:
    """Whether the run can be trusted as complete, and why not."""
    problems = []
    if len(info["grids"]) > 1:
        problems.append(f"{len(info['grids'])} different grids wrote here")
    if info["writers"]:
        problems.append("a writer is running")
    if info["bad_lines"]:
        problems.append(f"{plural(len(info['bad_lines']), 'line')} in the records files are not valid "
                        f"records (the next run of their shard quarantines them)")
    proxy = info.get("proxy") is not None
    if info["missing"]:
        problems.append(f"{plural(info['missing'], 'cell')} missing " + (
            f"({proxy_status.again(info['proxy'])})" if proxy else
            "(re-run the same command to resume)"))
    if info["cells"] is None:
        problems.append("no manifest says how many cells the grid has")
    errored = sum(info["errored"].get(t, 0) for t in ERROR_TERMINATIONS)
    if errored:
        problems.append(f"{plural(errored, 'cell')} ended in an error " + (
            "(the proxy failed or stopped: serve each again with limbo proxy into another "
            "--out)" if proxy else "(retry them with --retry-errors)"))
    if problems:
        return False, "; ".join(problems)
    if info["unsampled"]:
        return True, "every cell the --precision rule needed is recorded exactly once"
    return True, "every cell of the grid is recorded exactly once"


def _lines(info: dict[str, Any]) -> list[str]:
    out = [f"run directory: {info['run_dir']}"]
    for g in info["grids"]:
        out.append(f"grid: {g['name']} ({g['cells']} cells, fingerprint {g['fingerprint']})")
    out.append("writer: " + ("; ".join(info["writers"]) if info["writers"] else "none running"))
    errored = ", ".join(f"{k} {v}" for k, v in info["errored"].items()) or "none"
    out.append(f"episodes: {info['done']} done, {info['missing'] if info['missing'] is not None else '?'} "
               f"missing, {info['rated']} rated, errored: {errored}")
    out += _error_lines(info)
    if info["precision"]:
        out.append(f"precision: {info['precision']}; {plural(info['unsampled'], 'cell')} not needed")
    out.append(f"quarantine: {plural(info['quarantined'], 'line')} in {QUARANTINE}; "
               f"{plural(len(info['bad_lines']), 'bad line')} still in the records files")
    if info["superseded"]:
        out.append(f"superseded: {plural(info['superseded'], 'earlier attempt')} of retried cells in "
                   f"{SUPERSEDED} (history: counted by no reader)")
    out += [f"  {line}" for line in info["bad_lines"][:20]]
    out += proxy_status.lines(info["proxy"]) if info["proxy"] else []
    for p in info["passes"]:
        if p["kind"] != GRID:
            out.append(f"limbo {p['kind']}: {plural(p['done'], 'episode')} recorded, each its own "
                       f"cell; the last: {p['last_episode']}")
            continue
        what = f"shard {p['shard']}" if p["shard"] else "whole grid"
        reason = f" ({p['stop_reason']})" if p["stop_reason"] else ""
        cells = "?" if p["cells"] is None else p["cells"]  # a manifest LIMBO did not write
        last = p["status"] or f"unknown ({p['manifest']} does not say)"
        out.append(f"{what}: {p['done']} of {cells} done; last pass {last}{reason}")
        if p.get("spent") is not None:
            out.append(f"  {spend_line(p['forecast'], p['spent'])}")
    return out


def _error_lines(info: dict[str, Any]) -> list[str]:
    """The errored and timed-out episodes by reason, and the commands that run them again."""
    groups = ErrorGroups.from_json(info["errors"])
    if not groups.groups:
        return []
    out = ["errors by reason:", *groups.lines()]
    retry = info["retry"]
    if retry and groups.count():
        out.append(f"  run them again once the cause is fixed: {retry['errors']}")
    if retry and groups.count((TIMEOUT,)):
        out.append(f"  timed-out ones too: {retry['timeouts']}")
    return out


def status(run_dir: Path, as_json: bool, console: Any) -> int:
    info = report(run_dir)
    ok, why = verdict(info)
    if as_json:
        print(json.dumps({**info, "ok": ok, "verdict": why}, indent=2, ensure_ascii=False))
    else:
        for line in _lines(info):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        console.print(f"verdict: {'OK' if ok else 'NOT OK'} — {why}", highlight=False,
                      markup=False, soft_wrap=True)
    return 0 if ok else 1
