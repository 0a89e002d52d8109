"""Grids: which factors to cross, as data (TOML), validated by pydantic.

Expansion turns a grid into cells and drops combinations that cannot run (a fault mode that
cannot act on the cell's focal write, say) with a counted reason — never silently running them
as something else. Each cell's seed derives from (grid seed, cell identity without the seed), so
adding a factor level never changes an existing cell.
"""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from limbo.base.errors import UsageError
from limbo.base.hashing import digest
from limbo.base.registry import entries
from limbo.base.rng import derive_seed
from limbo.episode.harness import unavailable
from limbo.experiments.comparison import Comparison
from limbo.sim.cell import Cell
from limbo.sim.config import Limits, Timing
from limbo.sim.service import CONTRACTS, Contract
from limbo.sim.worldfile.kit import Kit, kit, load_world

ALL = "all"
MAX_CELLS = 1_000_000
MAX_REPEATS = 1_000
"""The most cells one grid may expand to: a run keeps each cell's id in memory (and a grid
this size is weeks of model calls). A larger grid is refused before it starts."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
FACTOR_FIELDS = {"model": "models", "harness": "harnesses", "condition": "conditions",
                 "contract": "contracts", "fault": "faults", "service": "services",
                 "template": "templates"}
"""Every factor, as the cell's field (also the command-line flag, ``--fault``) and the grid's
list of its levels (``faults``). The one map of factor names: the CLI, Inspect task parameters
and the analysis derive theirs from it."""
FACTORS = tuple(FACTOR_FIELDS.values())


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
    contracts: list[Contract | Literal["all"]] = [Contract.NATIVE]
    faults: list[str] = ["none"]
    services: list[str] = [ALL]
    templates: list[str] = [ALL]
    focal_writes: Literal["all", "first"] = "all"
    instances: int = Field(1, ge=1, le=10_000)
    """Instances 0 .. instances-1 of every template."""
    repeats: int = Field(1, ge=1, le=MAX_REPEATS, exclude_if=lambda n: n == 1)
    """Samples of every cell (``--repeats``): replicates 0 .. repeats-1, each in the cell's
    world with its own model-sampling seed. Left out of the grid's dump when 1, so a grid
    without repeats keeps its digest."""
    timing: Timing = Timing()
    limits: Limits = Limits()
    world: str | None = None
    """A world file or directory (docs/worlds.md; relative to the grid file): the grid runs
    that world's services and templates instead of the built-in ones."""
    overrides: dict[str, Any] = {}
    """Command-line replacements, carried into included grids."""
    comparisons: list[Comparison] = []
    """What the experiment contrasts: arms of one factor and the fields that pair them
    (:mod:`limbo.experiments.comparison`)."""
    _notices: list[str] = PrivateAttr(default_factory=list)

    @field_validator(*FACTORS)
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must list at least one level")
        return value

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not NAME.match(value):
            raise ValueError(f"{value!r} is not a plain name (letters, digits, '.', '_', '-'; "
                             f"at most 100; it names the run directory runs/<name>)")
        return value

    @property
    def notices(self) -> list[str]:
        """What was changed on the way in (repeated levels collapsed), to tell the user."""
        return self._notices


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
        singular = {field: flag for flag, field in FACTOR_FIELDS.items()}[name]
        raise UsageError(f"unknown {singular} {unknown[0]!r} in grid; choose from: "
                         f"{', '.join(choices)}")
    return given


def resolved(grid: Grid) -> dict[str, list[str]]:
    """Every factor's levels with ``all`` expanded and each level checked."""
    if grid.include:
        merged: dict[str, list[str]] = {}
        for sub in included(grid):
            for name, more in resolved(sub).items():
                merged[name] = list(dict.fromkeys([*merged.get(name, []), *more]))
        return merged
    temps = world_kit(grid).templates
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
    return _world_seed(grid_seed, *(cell[k] for k in WORLD_FACTORS))


@lru_cache(maxsize=4096)
def _world_seed(grid_seed: int, *task: object) -> int:
    """Once per task: a grid has a few hundred tasks and tens of thousands of cells."""
    return derive_seed(grid_seed, digest(dict(zip(WORLD_FACTORS, task, strict=True)), 32)) % (2**31)


def included(grid: Grid) -> list[Grid]:
    """The grids ``grid`` includes, with its own overrides (``overrides``) applied to each.
    Includes are one level deep, which also rules out cycles."""
    out = []
    for ref in grid.include:
        sub = load_grid(ref)
        if sub.include:
            raise UsageError(f"grid {grid.name} includes {ref}, which includes grids itself; "
                             f"list the grids it includes instead")
        repeats = {"repeats": grid.repeats} if grid.repeats != 1 else {}
        out.append(validated({**sub.model_dump(), **repeats, **grid.overrides}, f"grid {ref}"))
    return out


def collapse(raw: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """``raw`` with every level listed more than once kept once (cells are unique by
    construction), and a notice for each."""
    notices, out = [], dict(raw)
    for name in (*FACTORS, "include"):
        levels = raw.get(name)
        if not isinstance(levels, list):
            continue
        try:
            counts = Counter(levels)
        except TypeError:
            continue  # not hashable: validation says what is wrong
        for level, n in counts.items():
            if n > 1:
                notices.append(f"{where}: {name} lists {level!r} {n} times; it runs once")
        out[name] = list(dict.fromkeys(levels))
    return out, notices


def validated(raw: dict[str, Any], where: str, notices: list[str] | None = None) -> Grid:
    """``raw`` as a :class:`Grid` (repeated levels collapsed, with notices); a one-line
    :class:`UsageError` naming the bad key."""
    raw, found = collapse(raw, where)
    try:
        grid = Grid.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        # Union members show up in the location as "literal[...]"; they are noise to a user.
        loc = ".".join(str(p) for p in err["loc"] if "[" not in str(p))
        raise UsageError(f"{where}: {loc}: {err['msg']}") from None
    grid.notices.extend([*(notices or []), *found])
    return grid


def count_cells(grid: Grid) -> int:
    """How many cells ``grid`` expands to, without building one (for an ``include`` grid, the
    sum over its grids: an upper bound, as shared cells run once)."""
    if grid.include:
        return sum(count_cells(sub) for sub in included(grid))
    lv = resolved(grid)
    faults, found = entries("fault"), world_kit(grid)
    temps, ops = found.templates, found.ops
    cannot_run = _unavailable(lv["harnesses"])
    per = (len(lv["models"]) * len(lv["conditions"]) * len(lv["contracts"]) * grid.instances
           * grid.repeats * sum(1 for h in lv["harnesses"] if h not in cannot_run))
    total = 0
    for t_name in lv["templates"]:
        t = temps[t_name]
        if t.service not in lv["services"]:
            continue
        focal = t.focal_writes if grid.focal_writes == ALL else t.focal_writes[:1]
        for fault in lv["faults"]:
            total += per * sum(1 for fw in focal if faults[fault].applies(ops[fw]))
    return total


def check_size(grid: Grid) -> int:
    """The grid's size; a :class:`UsageError` past :data:`MAX_CELLS`."""
    size = count_cells(grid)
    if size > MAX_CELLS:
        raise UsageError(f"grid {grid.name} expands to {size:,} cells, more than the {MAX_CELLS:,} "
                         f"one run may hold; lower instances, narrow a factor, or split it into "
                         f"several grids")
    return size


def expand(grid: Grid) -> Expansion:
    """All runnable cells of ``grid``, in a deterministic order, in a list (use
    :func:`iter_cells` or :class:`~limbo.experiments.source.CellSource` to stream them
    instead)."""
    check_size(grid)
    out = Expansion()
    out.cells.extend(iter_cells(grid, out.dropped))
    return out


def iter_cells(grid: Grid, dropped: Counter[str] | None = None) -> Iterator[Cell]:
    """The runnable cells of ``grid`` one by one (memory does not grow with the grid, except
    for what an ``include`` grid keeps to run shared cells once); ``dropped`` counts the
    combinations that cannot run, by reason."""
    dropped = Counter() if dropped is None else dropped
    if not grid.include:
        for combo, seed in _runnable(grid, dropped):
            yield Cell(**combo, seed=seed, timing=grid.timing, limits=grid.limits)
        return
    seen: set[tuple[object, ...]] = set()
    settings: dict[tuple[Timing, Limits], int] = {}
    for sub in included(grid):
        same = settings.setdefault((sub.timing, sub.limits), len(settings))
        for combo, seed in _runnable(sub, dropped):
            # Everything the cell's id digests (grids with equal settings share a number), so
            # one key per id; known before the cell is built, so a cell two grids share is
            # built once (a quarter of the paper grid's cells are shared).
            key = (*combo.values(), seed, same)
            if key not in seen:
                seen.add(key)
                yield Cell(**combo, seed=seed, timing=sub.timing, limits=sub.limits)


def _runnable(grid: Grid, dropped: Counter[str]) -> Iterator[tuple[dict[str, object], int]]:
    """The combinations of a grid without includes that can run here, with their seeds."""
    lv = resolved(grid)
    found, faults = world_kit(grid), entries("fault")
    temps, ops = found.templates, found.ops
    world = {"world": found.identity} if found.identity is not None else {}
    absent = _unavailable(lv["harnesses"])
    for t_name in lv["templates"]:
        t = temps[t_name]
        if t.service not in lv["services"]:
            continue
        focal = t.focal_writes if grid.focal_writes == ALL else t.focal_writes[:1]
        for combo in _cross(grid, lv, t_name, t.service, focal, absent, dropped):
            reason = _why_not(combo, faults, ops)
            if reason is not None:
                dropped[reason] += 1
                continue
            yield {**combo, **world}, world_seed(grid.seed, combo)


def _why_not(cell: dict[str, object], faults: dict[str, Any], ops: dict[str, Any]) -> str | None:
    """Why ``cell``, of a harness that can run here, cannot run, or ``None``."""
    fault = faults[str(cell["fault"])]
    if fault.applies(ops[str(cell["focal_write"])]):
        return None
    where = "a focal write that is not a batch write" if fault.batch_only else cell["focal_write"]
    return f"{cell['fault']} cannot act on {where}"


def _unavailable(harnesses: list[str]) -> dict[str, str]:
    """Why each harness that cannot run on this machine cannot (asked once per expansion)."""
    return {name: f"harness {name} is not available here: {why}" for name in harnesses
            if (why := unavailable(name)) is not None}


def _cross(grid: Grid, lv: dict[str, list[str]], template: str, service: str,
           focal: list[str], absent: dict[str, str],
           dropped: Counter[str]) -> Iterator[dict[str, object]]:
    """One template's combinations but those of a harness ``absent`` here, counted as dropped
    without being built (the paper grid without the production harnesses: a third of a pass)."""
    block = (len(lv["conditions"]) * len(lv["contracts"]) * len(lv["faults"]) * len(focal)
             * grid.instances * grid.repeats)
    for model in lv["models"]:
        for harness in lv["harnesses"]:
            if harness in absent:
                if block:
                    dropped[absent[harness]] += block
                continue
            for condition in lv["conditions"]:
                for contract in lv["contracts"]:
                    for fault in lv["faults"]:
                        for fw in focal:
                            for instance in range(grid.instances):
                                cell = {"model": model, "harness": harness,
                                        "condition": condition, "contract": contract,
                                        "fault": fault, "service": service, "template": template,
                                        "instance": instance, "focal_write": fw}
                                yield cell
                                for replicate in range(1, grid.repeats):
                                    yield {**cell, "replicate": replicate}


def world_kit(grid: Grid) -> Kit:
    """The kit of the grid's world: a world file's (loaded, and refused when LIMBO cannot play
    it), or the built-in one."""
    return kit(None) if grid.world is None else load_world(grid.world).runnable()


def world_paths(grid: Grid) -> list[str]:
    """The world files a grid's cells run in (its includes' too)."""
    grids = included(grid) if grid.include else [grid]
    return list(dict.fromkeys(g.world for g in grids if g.world is not None))


def world_facts(grid: Grid) -> dict[str, Any]:
    """What a run's manifest says of the world files its grid runs (nothing for the built-in
    world): each file's path, name, digest and services."""
    grids = included(grid) if grid.include else [grid]
    found = {g.world: {**world_kit(g).source, "path": str(Path(g.world).resolve())}
             for g in grids if g.world is not None}
    return {"worlds": list(found.values())} if found else {}


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
        raw = tomllib.loads(path.read_bytes().decode("utf-8-sig"))  # a BOM is no TOML
    except OSError as exc:
        raise UsageError(f"cannot read grid file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"grid file {path} is not UTF-8 text (byte {exc.start}); TOML files "
                         f"are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"grid file {path} is not valid TOML: {exc}") from None
    raw.setdefault("name", path.stem)
    if isinstance(raw.get("world"), str):  # relative to the grid file, like a path in it
        raw["world"] = str(path.parent / raw["world"])
    return validated(raw, f"grid {path}")
