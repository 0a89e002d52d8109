"""LIMBO's Inspect tasks, found through the ``inspect_ai`` entry-point group.

``inspect eval limbo/<grid>`` runs a built-in grid (``limbo/e1``, ``limbo/default``, ...);
``inspect eval limbo/grid -T grid=my_grid.toml`` runs any grid file. Every task takes the same
parameters (``-T``): ``harness``, ``condition``, ``contract``, ``fault``, ``service``,
``template`` (each a level or a comma-separated list, replacing the grid's), ``instances``,
``seed`` and ``limit`` (the first N cells).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inspect_ai import Task, task

from limbo.experiments.grid import builtin_grids
from limbo.inspect.task import limbo_task

Levels = str | list[str] | None


def task_name(name: str) -> str:
    """The name to register so that Inspect lists the task as ``limbo/<name>``.

    Inspect prefixes a task with its package only when it finds the package installed under
    that import name — a wheel install of ``limbo-bench`` — and not from an editable checkout,
    where the prefix has to be part of the name."""
    from inspect_ai._util.package import get_installed_package_name

    return name if get_installed_package_name(task_name) == "limbo" else f"limbo/{name}"


def _grid_task(grid_name: str) -> Callable[..., Task]:
    def grid_task(harness: Levels = None, condition: Levels = None, contract: Levels = None,
                  fault: Levels = None, service: Levels = None, template: Levels = None,
                  instances: int | None = None, seed: int | None = None,
                  limit: int | None = None, repeats: int | None = None) -> Task:
        factors = {"harness": harness, "condition": condition, "contract": contract,
                   "fault": fault, "service": service, "template": template}
        return limbo_task(grid_name, factors, instances, seed, limit, repeats)

    grid_task.__name__ = grid_task.__qualname__ = grid_name
    grid_task.__doc__ = f"LIMBO grid {grid_name!r}, one sample per cell."
    return task(name=task_name(grid_name))(grid_task)


TASKS: dict[str, Callable[..., Task]] = {name: _grid_task(name) for name in builtin_grids()}
"""One task per built-in grid, named after it."""


@task(name=task_name("grid"))
def grid(grid: str = "default", **factors: Any) -> Task:
    """Any grid, built-in or a TOML file: ``-T grid=path/to/grid.toml``."""
    counts = {k: factors.pop(k, None) for k in ("instances", "seed", "limit", "repeats")}
    return limbo_task(grid, factors, **counts)
