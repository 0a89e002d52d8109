"""Grids: which factors to cross, as data (TOML), validated by pydantic.

Expansion turns a grid into cells and drops combinations that cannot run (a fault mode that
cannot act on the cell's focal write, say) with a counted reason — never silently running them
as something else. Each cell's seed derives from (grid seed, cell identity without the seed), so
adding a factor level never changes an existing cell.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from limbo.cell import Cell
from limbo.config import Limits, Timing
from limbo.errors import UsageError
from limbo.harness import unavailable
from limbo.hashing import digest
from limbo.registry import entries
from limbo.rng import derive_seed
from limbo.services import CONTRACTS, Contract, operations
from limbo.tasks import templates

ALL = "all"
FACTORS = ("models", "harnesses", "conditions", "contracts", "faults", "services", "templates")


class Grid(BaseModel):
    """A grid file. Lists may say ``["all"]`` for every registered level."""

    model_config = ConfigDict(extra="forbid")

    name: str = "custom"
    description: str = ""
    include: list[str] = []
    """Other grids whose cells this one runs (their union; shared cells run once)."""
    seed: int = 0
    models: list[str] = ["policy/verify"]
    harnesses: list[str] = ["minimal"]
    conditions: list[str] = ["vanilla"]
    contracts: list[Contract | Literal["all"]] = ["native"]
    faults: list[str] = ["none"]
    services: list[str] = [ALL]
    templates: list[str] = [ALL]
    focal_writes: Literal["all", "first"] = "all"
    instances: int = Field(1, ge=1, le=10_000)
    """Instances 0 .. instances-1 of every template."""
    timing: Timing = Timing()
    limits: Limits = Limits()
    overrides: dict[str, Any] = {}
    """Command-line replacements, carried into included grids."""

    @field_validator(*FACTORS)
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must list at least one level")
        return value


@dataclass
class Expansion:
    """The cells of a grid and what was dropped, by reason."""

    cells: list[Cell] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


def _levels(name: str, given: list[str], choices: list[str]) -> list[str]:
    if given == [ALL]:
        return choices
    unknown = [g for g in given if g not in choices]
    if unknown:
        singular = {"harnesses": "harness"}.get(name, name[:-1])
        raise UsageError(f"unknown {singular} {unknown[0]!r} in grid; choose from: "
                         f"{', '.join(choices)}")
    return given


def resolved(grid: Grid) -> dict[str, list[str]]:
    """Every factor's levels with ``all`` expanded and each level checked."""
    if grid.include:
        merged: dict[str, list[str]] = {}
        for sub in included(grid):
            for name, levels in resolved(sub).items():
                merged[name] = list(dict.fromkeys([*merged.get(name, []), *levels]))
        return merged
    temps = templates()
    levels = {
        "contracts": _levels("contracts", list(grid.contracts), list(CONTRACTS)),
        "faults": _levels("faults", grid.faults, list(entries("fault"))),
        "conditions": _levels("conditions", grid.conditions, list(entries("condition"))),
        "harnesses": _levels("harnesses", grid.harnesses, list(entries("harness"))),
        "services": _levels("services", grid.services, sorted({t.service for t in temps.values()})),
        "templates": _levels("templates", grid.templates, list(temps)),
        "models": grid.models,
    }
    return levels


WORLD_FACTORS = ("template", "focal_write", "instance")


def world_seed(grid_seed: int, cell: dict[str, object]) -> int:
    """The seed of a cell's world: it depends on the task (template, focal write, instance)
    and the grid seed only. Every arm of a paired comparison — models, harnesses,
    conditions, contracts, fault modes — therefore runs in the same world: the same ids, the
    same in-flight delay δ, the same partial-batch k. Adding a level to any factor never
    changes an existing cell."""
    return derive_seed(grid_seed, digest({k: cell[k] for k in WORLD_FACTORS}, 32)) % (2**31)


def included(grid: Grid) -> list[Grid]:
    """The grids ``grid`` includes, with its own overrides (``overrides``) applied to each.
    Includes are one level deep, which also rules out cycles."""
    out = []
    for ref in grid.include:
        sub = load_grid(ref)
        if sub.include:
            raise UsageError(f"grid {grid.name} includes {ref}, which includes grids itself; "
                             f"list the grids it includes instead")
        out.append(validated({**sub.model_dump(), **grid.overrides}, f"grid {ref}"))
    return out


def validated(raw: dict[str, Any], where: str) -> Grid:
    """``raw`` as a :class:`Grid`; a one-line :class:`UsageError` naming the bad key."""
    try:
        return Grid.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        # Union members show up in the location as "literal[...]"; they are noise to a user.
        loc = ".".join(str(p) for p in err["loc"] if "[" not in str(p))
        raise UsageError(f"{where}: {loc}: {err['msg']}") from None


def expand(grid: Grid) -> Expansion:
    """All runnable cells of ``grid``, in a deterministic order."""
    if grid.include:
        out = Expansion()
        seen: set[str] = set()
        for sub in included(grid):
            part = expand(sub)
            out.dropped.update(part.dropped)
            for cell in part.cells:
                if cell.episode_id not in seen:
                    seen.add(cell.episode_id)
                    out.cells.append(cell)
        return out
    lv = resolved(grid)
    faults = entries("fault")
    cannot_run = _unavailable(lv["harnesses"])
    ops = operations()
    temps = templates()
    out = Expansion()
    for t_name in lv["templates"]:
        t = temps[t_name]
        if t.service not in lv["services"]:
            continue
        focal = t.focal_writes if grid.focal_writes == ALL else t.focal_writes[:1]
        for cell in _cross(grid, lv, t_name, t.service, focal):
            reason = cannot_run.get(str(cell["harness"]))
            if reason is not None:
                out.dropped[f"harness {cell['harness']} is not available here: {reason}"] += 1
                continue
            fault = faults[cell["fault"]]
            if not fault.applies(ops[str(cell["focal_write"])]):
                where = ("a focal write that is not a batch write"
                         if fault.batch_only else cell["focal_write"])
                out.dropped[f"{cell['fault']} cannot act on {where}"] += 1
                continue
            seed = world_seed(grid.seed, cell)
            out.cells.append(Cell(**cell, seed=seed, timing=grid.timing, limits=grid.limits))
    return out


def _unavailable(harnesses: list[str]) -> dict[str, str]:
    """Why each harness that cannot run on this machine cannot (asked once per expansion)."""
    reasons = {name: unavailable(name) for name in harnesses}
    return {name: reason for name, reason in reasons.items() if reason is not None}


def _cross(grid: Grid, lv: dict[str, list[str]], template: str, service: str,
           focal: list[str]) -> Iterator[dict[str, object]]:
    for model in lv["models"]:
        for harness in lv["harnesses"]:
            for condition in lv["conditions"]:
                for contract in lv["contracts"]:
                    for fault in lv["faults"]:
                        for fw in focal:
                            for instance in range(grid.instances):
                                yield {"model": model, "harness": harness, "condition": condition,
                                       "contract": contract, "fault": fault, "service": service,
                                       "template": template, "instance": instance,
                                       "focal_write": fw}


def builtin_grids() -> dict[str, Path]:
    """Built-in grid files by name."""
    folder = resources.files("limbo.experiments") / "grids"
    return {Path(e.name).stem: Path(str(e)) for e in sorted(folder.iterdir(), key=lambda e: e.name)
            if e.name.endswith(".toml")}


def load_grid(ref: str) -> Grid:
    """A built-in grid by name, or a TOML file by path; :class:`UsageError` when it is bad."""
    grids = builtin_grids()
    path = grids.get(ref) or Path(ref)
    if ref not in grids and not path.is_file():
        raise UsageError(f"no grid {ref!r}: not a file, and not a built-in grid "
                         f"({', '.join(grids)})")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"grid file {path} is not valid TOML: {exc}") from None
    raw.setdefault("name", path.stem)
    return validated(raw, f"grid {path}")
