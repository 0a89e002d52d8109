"""What a run was made for, written into its manifest when it starts (``design``).

The analysis reads these facts from the log, never from today's grid files or registries, so a
run whose grid file was since edited or deleted — or that a later LIMBO would interpret
differently — is analysed as it was made:

* ``experiments``: each experiment the run holds (the grid itself, or each grid it includes)
  with the levels of every cell field, its size, its comparisons (arms and pairing factors)
  and a digest of its definition. A cell belongs to an experiment when each of its fields is
  one of the experiment's levels;
* ``faults``: each fault mode's family, every family it counts in, and its
  observation-equivalence group;
* ``tools`` and ``toolset``: each tool's kind (read, write, …) — what the recovery classifier
  needs — and a digest of that map;
* ``waits``: the assumed in-flight bound Δ (seconds) of each ``wait-Δ`` condition run;
* ``grader``: the version of the grading rules (:data:`limbo.log.grading.GRADER_VERSION`), and
  ``limbo``: the LIMBO version that wrote the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from limbo import __version__
from limbo.base.hashing import digest
from limbo.base.registry import entries
from limbo.errors import UsageError
from limbo.experiments.grid import ALL, FACTOR_FIELDS, Grid, included, resolved, world_kit
from limbo.log.grading import GRADER_VERSION
from limbo.sim.transport import split_transport

DESIGN_VERSION = 1
"""The shape of the ``design`` object (a reader refuses a version it does not know)."""


def _levels(grid: Grid) -> dict[str, list[str]]:
    """The levels of each cell field ``grid``'s cells take."""
    lv = resolved(grid)
    temps = {name: t for name, t in world_kit(grid).templates.items()
             if name in lv["templates"] and t.service in lv["services"]}
    focal = sorted({fw for t in temps.values()
                    for fw in (t.focal_writes if grid.focal_writes == ALL else t.focal_writes[:1])})
    models = list(dict.fromkeys(split_transport(m)[0] for m in lv["models"]))
    levels = {"model": models, "harness": lv["harnesses"], "condition": lv["conditions"],
              "contract": [str(c) for c in lv["contracts"]], "fault": lv["faults"],
              "service": sorted({t.service for t in temps.values()}), "template": sorted(temps),
              "focal_write": focal}
    return levels


def check_comparisons(grid: Grid) -> None:
    """A :class:`UsageError` for an arm that is not a level of its factor (a typo in the grid
    file), unless the command line replaced that factor's levels (then the arm is simply
    absent, and the tables say so)."""
    overridden = set(grid.overrides)
    for sub in included(grid) if grid.include else [grid]:
        levels = _levels(sub)
        for comparison in sub.comparisons:
            field = FACTOR_FIELDS[comparison.factor]
            missing = [a for a in comparison.arms if a not in levels[comparison.factor]]
            if missing and field not in overridden:
                raise UsageError(f"grid {sub.name}: comparison {comparison.name}: arm "
                                 f"{missing[0]!r} is not one of its {field} "
                                 f"({', '.join(levels[comparison.factor])})")


def experiment(grid: Grid) -> dict[str, Any]:
    """One experiment: the levels of each cell field its cells take, and its comparisons."""
    levels = _levels(grid)
    return {"name": grid.name, "description": grid.description,
            "digest": digest(grid.model_dump(mode="json", exclude={"overrides"})),
            "levels": levels, "instances": grid.instances, "seed": grid.seed,
            "comparisons": [c.model_dump(mode="json") for c in grid.comparisons]}


def design(grid: Grid) -> dict[str, Any]:
    """Everything the analysis needs about ``grid``'s run (see the module docstring)."""
    from limbo.sim.tools import toolset

    check_comparisons(grid)
    experiments = [experiment(sub) for sub in (included(grid) if grid.include else [grid])]
    modes = sorted({m for e in experiments for m in e["levels"]["fault"]})
    subs = included(grid) if grid.include else [grid]
    tools = {name: spec.kind for sub in subs
             for name, spec in sorted(toolset("native", world_kit(sub).services).items())}
    conditions = entries("condition")
    waits = {c: float(conditions[c].wait_s) for e in experiments for c in e["levels"]["condition"]
             if c.startswith("wait-") and getattr(conditions.get(c), "wait_s", None) is not None}
    return {**log_design(modes, tools), "grid_digest": digest(
        [e["digest"] for e in experiments]), "experiments": experiments,
        "waits": dict(sorted(waits.items()))}


def log_design(modes: Iterable[str], tools: Mapping[str, str]) -> dict[str, Any]:
    """The design of a run that is no experiment (``limbo mcp``, ``limbo proxy``): what its
    records mean — the families and groups of ``modes``, the kinds of ``tools``, the grader
    and LIMBO versions — with no experiment, so no table counts its episodes as one."""
    from limbo.sim.catalog import catalog

    info = catalog()
    faults = {m: {"family": info[m].family, "families": list(info[m].families),
                  "group": info[m].group} for m in sorted(modes)}
    tools = dict(sorted(tools.items()))
    return {"version": DESIGN_VERSION, "grid_digest": None, "experiments": [], "faults": faults,
            "tools": tools, "toolset": digest(tools), "waits": {}, "grader": GRADER_VERSION,
            "limbo": __version__}
