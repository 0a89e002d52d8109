"""A proxy run directory's manifest, and what ``limbo status`` says of its episodes.

A run directory of ``limbo proxy`` has no grid: each recorded episode is its own cell, and an
episode whose proxy stopped before recording it (killed, or still serving) is a journal without
a ``recorded`` line. ``limbo status`` counts such an episode as missing and says, from its
journal alone, how many writes it forwarded, how many the upstream acknowledged and how many
are in doubt (forwarded, no answer heard) — the ones ``limbo proxy --recover`` settles against
the upstream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from limbo.proxy.journal import FOLDER, read_journal, unrecorded

KIND = "proxy"
"""The manifest's ``kind``: episodes served by ``limbo proxy`` (no grid)."""


def write_manifest(out: Path, cell: Any, opts: Any, status: str) -> None:
    """The directory's manifest as an episode starts (``status``: ``serving``)."""
    from limbo.base.provenance import provenance
    from limbo.base.runtime import now_iso
    from limbo.log.store import manifest_file, read_manifest, scan
    from limbo.log.store import write_manifest as write

    path = manifest_file(out, None)
    old = read_manifest(path) if path.is_file() else {}
    done = len(scan(out).ids)
    write(path, {**old, "kind": KIND, "command": "limbo proxy", "status": status,
                 "episodes": done, "cells": done + 1, "world": opts.catalog.identity,
                 "upstream": opts.upstream.describe(), "cell": cell.public(),
                 "started_at": now_iso(), "design": _design(opts), **provenance()}, opts.scrub)


def _design(opts: Any) -> dict[str, Any]:
    """What the directory's records mean to a reader (no experiment: a proxy episode is its own
    cell): every fault mode's family and the declared tools' kinds."""
    from limbo.experiments.design import log_design
    from limbo.sim.catalog import catalog

    return log_design(catalog(), {name: t.kind for name, t in opts.catalog.tools.items()})


def record_written(out: Path, record: Mapping[str, Any]) -> None:
    """The manifest once an episode is recorded."""
    from limbo.base.runtime import now_iso
    from limbo.log.store import manifest_file, read_manifest, scan
    from limbo.log.store import write_manifest as write

    path = manifest_file(out, None)
    old = read_manifest(path) if path.is_file() else {}
    done = len(scan(out).ids)
    write(path, {**old, "kind": KIND, "status": "recorded", "episodes": done, "cells": done,
                 "last_episode": record["episode_id"], "ended_at": now_iso()})


def is_proxy_dir(manifests: dict[str, dict[str, Any]], run_dir: Path) -> bool:
    return any(m.get("kind") == KIND for m in manifests.values()) or (run_dir / FOLDER).is_dir()


def report(run_dir: Path, recorded: Collection[str], live: bool,
           conform: bool = False) -> dict[str, Any]:
    """The proxy part of ``limbo status``: cells (recorded + unrecorded), per unrecorded
    episode its journal's counts (``serving`` while a proxy holds the directory), the
    declarations the recorded episodes' upstream contradicted, and whether ``limbo conform``
    (whose checks are proxied episodes too) wrote the run."""
    from limbo.log.store import iter_records

    episodes = [_journal(p, live) for p in unrecorded(run_dir, recorded)]
    wrong = [{"episode": r["episode_id"], **w} for r in iter_records(run_dir)
             for w in _proxy_of(r).get("misdeclared", [])]
    return {"cells": len(recorded) + len(episodes), "unrecorded": episodes,
            "misdeclared": wrong, "conform": conform}


def again(info: Mapping[str, Any]) -> str:
    """How to get an unrecorded episode recorded: ``limbo proxy --recover`` settles a proxied
    agent's writes in doubt; a conform check is not resumed but made again."""
    if info.get("conform"):
        return ("run the same limbo conform command into another --out: a check cut short is "
                "made again, not resumed; its journal stays here as evidence")
    return "record them: the same limbo proxy command with --recover"


def _proxy_of(record: Mapping[str, Any]) -> dict[str, Any]:
    found = dict(record).get("runtime")
    proxy = found.get("proxy") if isinstance(found, dict) else None
    return proxy if isinstance(proxy, dict) else {}


def _journal(path: Path, live: bool) -> dict[str, Any]:
    entries = read_journal(path)
    answered: dict[int, str] = {}
    for entry in entries:
        if entry["type"] in ("ack", "lost"):
            answered[entry["n"]] = entry["state"] if entry["type"] == "ack" else "lost"
    intents = [e["n"] for e in entries if e["type"] == "intent"]
    states = Counter(answered.get(n, "unanswered") for n in intents)
    return {"episode": path.stem, "state": "serving" if live else "interrupted",
            "writes": len(intents),
            "acknowledged": states["committed"] + states["replayed"],
            "answered_with_error": states["uncertain"],
            "in_doubt": states["unanswered"] + states["lost"], "journal": str(path)}


def lines(info: dict[str, Any]) -> list[str]:
    """``limbo status``'s lines for the unrecorded proxy episodes."""
    out = []
    for e in info["unrecorded"]:
        out.append(f"proxy episode {e['episode']} {e['state']}, not recorded: its journal holds "
                   f"{e['writes']} forwarded write(s): {e['acknowledged']} acknowledged by the "
                   f"upstream, {e['answered_with_error']} answered with an error, "
                   f"{e['in_doubt']} in doubt (no answer heard)")
    if any(e["state"] == "interrupted" for e in info["unrecorded"]):
        out.append(f"  {again(info)}" if info.get("conform") else
                   "  record them: run the same limbo proxy command with --recover (it "
                   "reconciles the writes in doubt against the upstream)")
    for w in info.get("misdeclared", []):
        out.append(f"proxy episode {w['episode']}: the world file declares {w['declared']} for "
                   f"{w['tool']}, but the upstream committed a repeat of key {w['key']!r} as a "
                   f"new effect (request {w['request_id']}): the ledger counts what happened; "
                   f"fix the declaration (or the server)")
    return out
