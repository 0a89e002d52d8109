"""Which run each loaded episode came from, and what that run says it was made for.

A run directory's manifest carries the run's *design* (:mod:`limbo.experiments.design`): the
experiments it holds with their levels and comparisons, the fault modes' families and groups,
the tools' kinds, the grader version. The analysis takes all of these from there — never from
today's grid files or registries — so a run is read as it was made, even after its grid file
was edited or deleted.

An episode belongs to an experiment of a run when the run holds it and each of its cell fields
is one of the experiment's levels. An episode found in several runs (overlapping grids share
cells: E1's instance 0 is also E6's vanilla arm) belongs to the experiments of each.

Input without a design — a record file outside a run directory, an Inspect log, a run written
before designs were recorded — is read against the design the caller hands the loader
(``fallback``: the ``limbo`` commands hand this LIMBO's built-in grids, any model, with the
families of every registered fault mode and the kinds of every registered tool), and reported
(``no design``). Without a fallback its episodes belong to no experiment and its modes to no
family: the analysis never asks a registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from limbo.base.errors import UsageError

EXPERIMENT = "exp:"
"""Prefix of the frame's membership columns: ``exp:e1`` is true for E1's episodes."""
FALLBACK = "(built-in grids)"
BUILT_IN = "built-in"
"""The ``world`` of an episode that ran on LIMBO's own services (no world file)."""


@dataclass
class Run:
    """One source of episodes: a run directory (or a file, or the fallback)."""

    key: str
    """The directory (or file) it was read from."""
    design: dict[str, Any]
    manifest: dict[str, Any] = field(default_factory=dict)
    files: list[int] = field(default_factory=list)
    """Numbers of its record files in :attr:`Loaded.files`."""
    manifests: list[dict[str, Any]] = field(default_factory=list)
    """Every manifest of the run (one per shard)."""
    held: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Which rows of the loaded frame the run holds (an episode two runs hold is in both)."""
    members: dict[str, np.ndarray] = field(default_factory=dict)
    """Experiment name → the rows the run holds as that experiment's."""

    @property
    def recorded(self) -> bool:
        """Whether the design is the run's own (read from its manifest)."""
        return bool(self.manifest.get("design"))

    @property
    def kind(self) -> str:
        """What wrote the run: ``grid`` (``limbo run``), ``mcp``, ``proxy``, ``inspect`` (an
        Inspect log), or ``records`` (record files without a manifest)."""
        from limbo.log.store import kind_of

        if str(self.manifest.get("source", "")).startswith("Inspect"):
            return "inspect"
        return kind_of(self.manifest) if self.manifest else "records"

    def worlds(self) -> list[tuple[str, frozenset[str]]]:
        """The world files the run's episodes ran on: (identity ``name@digest``, its own
        services) each; none for the built-in world. A ``limbo proxy`` or ``limbo mcp`` run
        names its one world; a grid's run lists the world files its grids ran."""
        found: dict[str, frozenset[str]] = {}
        for manifest in self.manifests or [self.manifest]:
            world = manifest.get("world")
            if isinstance(world, str) and world:
                found.setdefault(world, frozenset())
            for fact in manifest.get("worlds") or ():
                if isinstance(fact, dict) and isinstance(fact.get("identity"), str):
                    found.setdefault(fact["identity"], frozenset(map(str, fact.get("services")
                                                                     or ())))
        return sorted(found.items())

    def planned(self) -> int | None:
        """How many episodes the run's grid has (``None`` when no manifest says)."""
        for manifest in self.manifests or [self.manifest]:
            if isinstance(manifest.get("grid_cells"), int):
                return int(manifest["grid_cells"])
        return None

    def ended(self) -> str:
        """How the run's last pass ended when that was not ``complete`` (``stopped: …``)."""
        for manifest in self.manifests or [self.manifest]:
            status = manifest.get("status")
            if status in ("stopped", "interrupted", "failed", "running"):
                reason = manifest.get("stop_reason")
                return f"{status}{f': {reason}' if reason else ''}"
        return ""

    def describe(self, episodes: int | None = None) -> str:
        """One line: grids (or what served the episodes), fingerprint, LIMBO version, grader
        version — no path, so the line is the same wherever the run is stored; with
        ``episodes`` (those loaded from it), how many of the grid's it holds when not all
        ("1,206 of 5,760 episodes")."""
        names = "+".join(e["name"] for e in self.design["experiments"])
        if not self.recorded:
            return f"{names or 'records'} {FALLBACK}: no design recorded, read as this LIMBO's grids"
        source = self.manifest.get("source") or \
            f"run {str(self.manifest.get('fingerprint', '?'))[:12]}"
        digest = f"grid digest {self.design.get('grid_digest', '?')}"
        if self.kind in ("mcp", "proxy"):  # no grid: what served the episodes, and how many
            names, source = f"limbo {self.kind}", "run"
            digest = (f"{episodes:,} episode{'s' if episodes != 1 else ''}"
                      if episodes is not None else "")
        version = self.manifest.get("version") or self.design.get("limbo", "?")
        facts = [self.partial(episodes), *(f"world file {w}" for w, _ in self.worlds()),
                 digest, f"LIMBO {version}", f"grader {self.design.get('grader', '?')}"]
        stopped = (self.manifest.get("precision") or {}).get("note")
        return (f"{names}{self.overridden()} {source} ({', '.join(f for f in facts if f)})"
                + (f"; {stopped}" if isinstance(stopped, str) else ""))

    def overridden(self) -> str:
        """`` [contracts: keys-everywhere; seed: 1]``: what the command line replaced in the
        grid (``limbo run e2 --contract keys-everywhere --seed 1``), or ``""``."""
        grid = self.manifest.get("grid")
        found = grid.get("overrides") if isinstance(grid, dict) else None
        if not isinstance(found, dict) or not found:
            return ""
        shown = [f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                 for k, v in sorted(found.items())]
        return f" [{'; '.join(shown)}]"

    def partial(self, episodes: int | None) -> str:
        """``1,206 of 5,760 episodes; stopped: …`` for a run holding fewer episodes than its
        grid has, else ``""``."""
        planned = self.planned()
        if episodes is None or planned is None or episodes >= planned:
            return ""
        ended = self.ended()
        return f"{episodes:,} of {planned:,} episodes{f'; {ended}' if ended else ''}"


Fallback = Callable[[], dict[str, Any]]
"""The design of input that recorded none (the ``limbo`` commands hand the built-in grids')."""
NO_DESIGN: dict[str, Any] = {"experiments": []}


def _design(manifests: dict[str, dict[str, Any]],
            fallback: Fallback | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, design) of a run directory's manifests: shards of one grid share one design."""
    for manifest in manifests.values():
        found = manifest.get("design")
        if isinstance(found, dict) and isinstance(found.get("experiments"), list):
            return manifest, found
    return {}, fallback() if fallback is not None else NO_DESIGN


def _inspect(path: Path) -> dict[str, dict[str, Any]]:
    """An Inspect log's design as a manifest would hold it (none for a log without one)."""
    if path.suffix not in (".eval", ".json"):
        return {}
    from limbo.log.inspect_logs import design, is_inspect_log

    found = design(path) if is_inspect_log(path) else None
    return {path.name: {"design": found, "source": f"Inspect log {path.name}"}} if found else {}


def locate(given: Path, path: Path) -> tuple[str, Path | None]:
    """The run a record file belongs to: (key, directory whose manifests describe it)."""
    folder = given if given.is_dir() else path.parent
    if given.is_dir() or any(folder.glob("manifest*.json")):
        return str(folder), folder
    return str(path), None


class Runs:
    """The runs met while loading, by key."""

    def __init__(self, fallback: Fallback | None = None) -> None:
        self.fallback = fallback
        self.by_key: dict[str, Run] = {}
        self.problems: list[tuple[str, str, str]] = []

    def add(self, given: Path, path: Path, file_no: int) -> None:
        key, folder = locate(given, path)
        if path.suffix in (".eval", ".json"):  # an Inspect log: its design is in its header
            key, folder = str(path), None
        run = self.by_key.get(key)
        if run is None:
            manifests = self._manifests(folder) if folder is not None else _inspect(path)
            manifest, found = _design(manifests, self.fallback)
            run = self.by_key[key] = Run(key, found, manifest,
                                         manifests=[m for m in manifests.values()
                                                    if isinstance(m, dict)])
            if not run.recorded:
                self.problems.append(("no design", key, "no manifest with a design: experiment "
                                      "membership, fault families and tool kinds are taken from "
                                      + ("the design the command handed (this LIMBO's built-in "
                                         "grids and registry)" if self.fallback is not None else
                                         "nowhere: it belongs to no experiment, and its modes "
                                         "have no family")))
        run.files.append(file_no)

    def _manifests(self, folder: Path | None) -> dict[str, dict[str, Any]]:
        if folder is None:
            return {}
        from limbo.log.store import manifests

        try:
            return manifests(folder)
        except UsageError as exc:
            self.problems.append(("bad manifest", str(folder), str(exc)[:160]))
            return {}

    def __iter__(self) -> Any:
        return iter(self.by_key.values())


def attach(frame: pd.DataFrame, runs: Iterable[Run], also: list[tuple[str, int]]) -> None:
    """Add to ``frame`` the run of each row (``run``: its first run's position), its
    experiments (``exp:NAME`` columns), and its fault family and group from that run's design."""
    runs = list(runs)
    owner = np.full(len(frame), -1)
    file_run = {f: i for i, run in enumerate(runs) for f in run.files}
    files = frame["file"].to_numpy()
    for f, i in file_run.items():
        owner[files == f] = i
    extra: dict[int, set[str]] = {}
    for episode_id, f in also:
        extra.setdefault(file_run[f], set()).add(episode_id)
    frame["run"] = owner
    names = sorted({e["name"] for run in runs for e in run.design["experiments"]})
    member = {name: np.zeros(len(frame), dtype=bool) for name in names}
    ids = frame["episode_id"]
    for i, run in enumerate(runs):
        run.held = mine = (owner == i) | ids.isin(extra.get(i, ())).to_numpy()
        for experiment in run.design["experiments"]:
            run.members[experiment["name"]] = mine & _inside(frame, experiment)
            member[experiment["name"]] |= run.members[experiment["name"]]
    for name, mask in member.items():
        frame[EXPERIMENT + name] = mask
    _faults(frame, runs, owner)
    _worlds(frame, runs, owner)


def _worlds(frame: pd.DataFrame, runs: list[Run], owner: np.ndarray) -> None:
    """Each row's ``world``: :data:`BUILT_IN`, or the identity of the world file it ran on (its
    run's one world file, or the one whose services hold the row's service); and ``source``,
    what wrote its run (:attr:`Run.kind`). An episode id digests the world, so an episode found
    in two runs ran on the same world in both."""
    world = np.full(len(frame), BUILT_IN, dtype=object)
    source = np.full(len(frame), "records", dtype=object)
    services = frame["service"].astype(str).to_numpy()
    for i, run in enumerate(runs):
        rows = owner == i
        source[rows] = run.kind
        found = run.worlds()
        if len(found) == 1:
            world[rows] = found[0][0]
            continue
        for identity, own in found:
            world[rows & np.isin(services, list(own))] = identity
    frame["world"] = pd.Categorical(world)
    frame["source"] = pd.Categorical(source)


def _inside(frame: pd.DataFrame, experiment: dict[str, Any]) -> np.ndarray:
    """Rows whose every cell field is one of ``experiment``'s levels."""
    mask: np.ndarray = (frame["instance"] < int(experiment["instances"])).to_numpy().copy()
    for column, levels in experiment["levels"].items():
        mask &= frame[column].isin(levels).to_numpy()
    return mask


def fault_table(runs: Iterable[Run]) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    """Mode → (family, group, every family), from the runs' designs (the first run that names a
    mode wins; a run that recorded none carries the design the command handed the loader)."""
    found: dict[str, tuple[str, str | None, tuple[str, ...]]] = {}
    for run in runs:
        for mode, info in run.design.get("faults", {}).items():
            found.setdefault(mode, (info["family"], info["group"], tuple(info["families"])))
    return found


def _faults(frame: pd.DataFrame, runs: list[Run], owner: np.ndarray) -> None:
    family = np.full(len(frame), "unknown", dtype=object)
    group = np.full(len(frame), "-", dtype=object)
    faults = frame["fault"].astype(str).to_numpy()
    table = fault_table(runs)
    for i, run in enumerate([*runs, None]):
        rows = owner == (i if run is not None else -1)
        own = fault_table([run]) if run is not None else table
        for mode in set(faults[rows]):
            at = rows & (faults == mode)
            info = own.get(mode) or table.get(mode)
            if info is not None:
                family[at], group[at] = info[0], info[1] or "-"
    frame["family"] = pd.Categorical(family)
    frame["group"] = pd.Categorical(group)


def tool_kinds(runs: Iterable[Run]) -> dict[str, str]:
    """Tool → kind from the runs' designs (the first run that names a tool wins)."""
    found: dict[str, str] = {}
    for run in runs:
        for tool, kind in run.design.get("tools", {}).items():
            found.setdefault(tool, kind)
    return found
