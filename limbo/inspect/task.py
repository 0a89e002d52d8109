"""A LIMBO grid as an Inspect task: dataset of cells, a solver that runs the episode, a
scorer that reads the episode's graded outcome.

The solver hands the episode to LIMBO's own runner (:func:`limbo.episode.run_one.arun_episode`): the
world, the sim clock (each model turn costs the think time), the boundary and its faults, the
condition's tool layer, the limits, settling and the record are the ones a grid uses. Only the
model is Inspect's. The record is stored whole in the sample's metadata (:data:`RECORD_KEY`).

The scorer reads the outcome LIMBO's grader gave that record from its ledger and report (as
every LIMBO reader does: grading again is explicit, ``limbo tables --regrade``), giving
duplicate, missing, TS, EOS and overclaim per sample. As in LIMBO's tables, these rates
are over rated episodes only (:mod:`limbo.log.rated`: the fault fired, and the episode did not end in
``infra_error``, ``model_error`` or ``timeout``): for any other sample each rate is NaN, which
Inspect's metrics skip; ``fault_fired`` is always scored.
"""

from __future__ import annotations

import math
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

from limbo.episode.run_one import arun_episode
from limbo.experiments.design import design
from limbo.inspect.cells import CELL_KEY, bind, cell_metadata, grid_cells, sample_id, task_grid
from limbo.inspect.model import InspectAdapter
from limbo.log.inspect_logs import DESIGN_KEY, RECORD_KEY
from limbo.log.rated import rated

RATES = ("duplicate", "missing", "task_success", "exactly_once", "overclaim")
EPOCHS = ("an epoch would re-run the identical cell under the same episode id: for samples "
          "of every cell use -T repeats=K (limbo run --repeats K) instead of --epochs")


def limbo_task(grid: str, factors: dict[str, Any], instances: int | None = None,
               seed: int | None = None, limit: int | None = None,
               repeats: int | None = None) -> Task:
    """The task running ``grid``'s cells (see :func:`limbo.inspect.cells.grid_cells`)."""
    expansion = grid_cells(grid, factors, instances, seed, limit, repeats)
    samples = [Sample(id=sample_id(c), input=_describe(c), metadata={CELL_KEY: cell_metadata(c)})
               for c in expansion.cells]
    return Task(dataset=MemoryDataset(samples, name=f"limbo-{grid}"), solver=episode(),
                scorer=ledger(), epochs=1,
                metadata={"limbo_grid": grid, "limbo_dropped": dict(expansion.dropped),
                          DESIGN_KEY: task_design(grid, factors, instances, seed, repeats)})


def task_design(grid: str, factors: dict[str, Any], instances: int | None,
                seed: int | None, repeats: int | None = None) -> dict[str, Any]:
    """The run's design (:mod:`limbo.experiments.design`), written into the eval log so the
    analysis reads the log as the run it is; the model is Inspect's, so any model belongs."""
    found = design(task_grid(grid, factors, instances, seed, repeats))
    for experiment in found["experiments"]:
        experiment["levels"].pop("model")
    return found


def _describe(cell: Any) -> str:
    return (f"LIMBO task {cell.template} (instance {cell.instance}) under fault {cell.fault}, "
            f"contract {cell.contract}, condition {cell.condition}")


@solver
def episode() -> Solver:
    """Run the sample's cell as one LIMBO episode, with the eval's model."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.epoch > 1:
            raise ValueError(EPOCHS)
        cell = bind(state.metadata[CELL_KEY], str(state.model))
        record = await arun_episode(cell, InspectAdapter(str(state.model), state=state))
        state.metadata[RECORD_KEY] = record
        state.completed = True
        return state

    return solve


@scorer(metrics={name: [mean(), stderr()] for name in ("fault_fired", *RATES)})
def ledger() -> Scorer:
    """Score the episode by the outcome graded from its ledger and final report."""

    async def score(state: TaskState, target: Target) -> Score:
        record = state.metadata.get(RECORD_KEY)
        if record is None:
            return Score.unscored(explanation="the episode produced no record")
        outcome = record["outcome"]
        counted = rated(outcome["fault_fired"], outcome["termination"])
        value = {name: float(outcome[name]) if counted else math.nan for name in RATES}
        return Score(value={"fault_fired": float(outcome["fault_fired"]), **value},
                     answer=str(outcome["report_status"]),
                     explanation=_explain(record["episode_id"], outcome),
                     metadata={"episode_id": record["episode_id"],
                               "termination": outcome["termination"]})

    return score


def _explain(episode_id: str, outcome: dict[str, Any]) -> str:
    flags = [name for name in ("duplicate", "missing", "overclaim") if outcome[name]]
    verdict = "exactly once" if outcome["exactly_once"] else ", ".join(flags) or "not exactly once"
    return (f"{episode_id}: {verdict}; fault fired: {outcome['fault_fired']}; "
            f"termination: {outcome['termination']}; commits: {outcome['commits']}")
