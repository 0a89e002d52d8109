"""The cells of an Inspect task: a LIMBO grid with its factors narrowed by task parameters.

Expansion is the grid runner's own (:func:`limbo.experiments.grid.expand`), so a task runs
exactly the cells ``limbo run`` would run for the same grid and factors, with the same seeds
(a cell's world seed never depends on the model). The grid's models are replaced by the eval's
one model, which is only known when a sample runs: a cell here carries every field but the
model (:data:`CELL_KEY` in the sample's metadata).
"""

from __future__ import annotations

from typing import Any

from limbo.base.errors import UsageError
from limbo.experiments.grid import FACTOR_FIELDS, Expansion, Grid, expand, load_grid, validated
from limbo.sim.cell import Cell

CELL_KEY = "limbo_cell"
"""Sample metadata key: the cell without its model."""
PLACEHOLDER = "inspect/eval-model"
"""The model of a cell before a sample runs (replaced by ``inspect/<the eval's model>``)."""
FACTOR_PARAMS = {name: field for name, field in FACTOR_FIELDS.items() if name != "model"}
"""The factors a task parameter narrows: all but the model (the eval names it)."""


def levels(name: str, value: str | list[str] | None) -> list[str] | None:
    """A factor parameter as levels: ``-T fault=a,b`` and ``-T fault=[a,b]`` both work."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    found = [item.strip() for item in items if str(item).strip()]
    if not found:
        raise UsageError(f"task parameter {name} names no level")
    return found


def grid_cells(grid: str, factors: dict[str, str | list[str] | None],
               instances: int | None = None, seed: int | None = None,
               limit: int | None = None, repeats: int | None = None) -> Expansion:
    """The cells of ``grid`` (a built-in name or a TOML path) with ``factors`` (``harness``,
    ``condition``, ``contract``, ``fault``, ``service``, ``template``) replacing the grid's
    levels; the first ``limit`` cells when given."""
    unknown = sorted(set(factors) - set(FACTOR_PARAMS))
    if unknown:
        raise UsageError(f"unknown task parameter {unknown[0]!r}; choose from "
                         f"{', '.join(FACTOR_PARAMS)}, instances, seed, limit, repeats")
    if limit is not None and limit < 0:
        raise UsageError(f"task parameter limit must be at least 0, got {limit}")
    expansion = expand(task_grid(grid, factors, instances, seed, repeats))
    if limit is not None:
        expansion.cells = expansion.cells[:limit]
    return expansion


def task_grid(grid: str, factors: dict[str, str | list[str] | None],
              instances: int | None = None, seed: int | None = None,
              repeats: int | None = None) -> Grid:
    """``grid`` with the task parameters applied (the model is Inspect's: a placeholder);
    ``repeats`` is ``limbo run --repeats``: replicates 0 .. repeats-1 of every cell."""
    base = load_grid(grid)
    changes: dict[str, Any] = {"models": [PLACEHOLDER]}
    for name, value in factors.items():
        found = levels(name, value)
        if found is not None:
            changes[FACTOR_PARAMS[name]] = found
    if instances is not None:
        changes["instances"] = instances
    if seed is not None:
        changes["seed"] = seed
    if repeats is not None:
        changes["repeats"] = repeats
    return validated({**base.model_dump(), **changes, "overrides": changes}, "task parameters")


def sample_id(cell: Cell) -> str:
    """A readable, unique id for the sample of ``cell`` (every field but the model; the
    replicate index only from 1, as in the cell's episode id)."""
    replicate = f"/r{cell.replicate}" if cell.replicate else ""
    return (f"{cell.template}/{cell.focal_write}/{cell.instance}/{cell.fault}/{cell.contract}/"
            f"{cell.condition}/{cell.harness}/seed{cell.seed}{replicate}")


def cell_metadata(cell: Cell) -> dict[str, Any]:
    """What a sample carries to rebuild its cell once the model is known."""
    return cell.model_dump(mode="json", exclude={"model"})


def bind(metadata: dict[str, Any], model: str) -> Cell:
    """The cell of a sample, run by ``inspect/<model>``."""
    return Cell(model=f"inspect/{model}", **metadata)
