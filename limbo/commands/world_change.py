"""Naming a changed world file. A run's manifest records each world file the run played (its
path, name and digest); a world's identity is part of every cell's id, so once the file's
bytes change its cells are other cells. The symptoms — a run directory that "holds another
grid", a stored cell that no longer hashes to its id, a replay that finds no recorded episode —
say nothing of the cause; the commands that meet them call here first and say which file
changed, and how to get back to the run's world.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.sim.worldfile.kit import DIGEST_CHARS

RESTORE = ("so the run's cells are other cells now: restore the file as it was (from version "
           "control or a backup) to use that run, or give the changed world another run "
           "directory")


def recorded(run_dir: Path) -> list[dict[str, Any]]:
    """The world files a run directory's manifests name, each once."""
    from limbo.log.store import manifests

    found: dict[str, dict[str, Any]] = {}
    try:
        read = manifests(run_dir) if run_dir.is_dir() else {}
    except UsageError:  # named where the directory is read for what it holds
        read = {}
    for manifest in read.values():
        for world in manifest.get("worlds") or ():
            if isinstance(world, dict) and isinstance(world.get("path"), str):
                found.setdefault(world["path"], world)
    return list(found.values())


def on_disk(run_dir: Path) -> list[str]:
    """A sentence for each world file the run played that is not on disk as it was."""
    from limbo.sim.worldfile.source import read

    said = []
    for was in recorded(run_dir):
        path = Path(was["path"])
        if not path.exists():
            said.append(f"the run's world file {path} ({_identity(was)}) is gone: put it back "
                        f"as it was to use that run")
            continue
        digest = read(path).digest
        if digest != was.get("digest"):
            said.append(f"the run's world file {path} has changed since the run "
                        f"({_identity(was)} then, {_identity({**was, 'digest': digest})} now), "
                        f"{RESTORE}")
    return said


def against(run_dir: Path, current: Iterable[Mapping[str, Any]]) -> list[str]:
    """A sentence for each world file of the run that the world files of this command
    (``current``: path, name and digest, as a manifest has them) replace with other bytes."""
    now = list(current)
    said = []
    if not now:
        return [f"that run played world {_identity(w)} from {w['path']}, this one LIMBO's own "
                f"services: give --world {w['path']}" for w in recorded(run_dir)]
    for was in recorded(run_dir):
        same = next((w for w in now if w.get("path") == was["path"]), None)
        named = next((w for w in now if w.get("name") == was.get("name")), None)
        if same is not None and same.get("digest") != was.get("digest"):
            said.append(f"the world file {was['path']} has changed since that run "
                        f"({_identity(was)} then, {_identity(same)} now), {RESTORE}")
        elif same is None and named is not None and named.get("digest") != was.get("digest"):
            said.append(f"that run played world {_identity(was)} from {was['path']}, this one "
                        f"{_identity(named)} from {named.get('path')}: give --world "
                        f"{was['path']}, or another run directory")
    return said


def refuse(what: str, changes: list[str]) -> None:
    """A :class:`UsageError` saying why ``what`` cannot be done, when a world changed."""
    if changes:
        raise UsageError(f"{what}: {'; '.join(changes)}")


def _identity(world: Mapping[str, Any]) -> str:
    return f"{world.get('name', '?')}@{str(world.get('digest', '?'))[:DIGEST_CHARS]}"
