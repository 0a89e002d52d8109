"""Run one episode end to end and build its record (schema ``limbo.episode/1``).

The record is a pure function of the cell, except for ``runtime``. Anything that goes wrong
inside the sandbox ends the episode as ``infra_error`` with the reason recorded; a provider
that fails after retries ends it as ``model_error``. Neither is ever raised past this module,
so a grid goes on.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Callable
from typing import Any

from limbo import __version__
from limbo.adapter import EpisodeContext, ModelAdapter, make_adapter
from limbo.cell import Cell
from limbo.errors import ModelError, UsageError
from limbo.grading import grade
from limbo.harness import Harness
from limbo.hashing import digest
from limbo.registry import lookup
from limbo.runtime import host_facts, stopwatch
from limbo.tasks import fill
from limbo.world import World

SCHEMA = "limbo.episode/1"


class _Lenient(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "?"


def focal_write_class(world: World) -> dict[str, str] | None:
    """Write class of the focal write, with the plan's arguments for it."""
    for step in world.task.template.steps:
        if step.tool == world.cell.focal_write:
            spec = world.tools[step.tool]
            assert spec.op is not None
            return world.endpoint.write_class(spec.op, fill(step.args, _Lenient(world.vars)))
    return None


def _context(world: World) -> EpisodeContext:
    def read_lag(tool: str, args: dict[str, Any]) -> float | None:
        op = world.tools[tool].op
        assert op is not None
        return world.endpoint.read_lag(op, args)

    return EpisodeContext(episode_id=world.cell.episode_id, seed=world.cell.seed,
                          contract=world.cell.contract, plan=world.task.template,
                          vars=dict(world.vars), tool_specs=world.tools, read_lag=read_lag)


def _reason(exc: BaseException) -> str:
    """A bug, described by type, message and where it was raised (file name, not path, so
    the text does not depend on where LIMBO is installed)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{type(exc).__name__}: {exc} @ {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"


async def arun_episode(cell: Cell, adapter: ModelAdapter | None = None,
                       make_harness: Callable[..., Harness] | None = None) -> dict[str, Any]:
    """Run ``cell`` and return its record. Only a :class:`UsageError` escapes.
    ``make_harness`` builds the harness instead of the one registered as ``cell.harness``
    (``limbo mcp`` serves the episode to an outside client)."""
    started = stopwatch()
    condition = lookup("condition", cell.condition)()
    harness_cls = make_harness or lookup("harness", cell.harness)
    adapter = adapter or make_adapter(cell.model)
    try:
        world = World(cell)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a sandbox bug must not end the grid
        await adapter.aclose()
        return _record(cell, _unbuilt_header(cell), _broken_outcome(_reason(exc)), started)
    header = {"timing": cell.timing.model_dump(), "limits": cell.limits.model_dump(),
              "prompts": condition.prompt_hashes(), "task_prompt": world.prompt(),
              "intents": world.intents(), "version": __version__,
              "plan_hash": digest(world.task.template.model_dump(mode="json"))}
    harness: Harness = harness_cls(world, adapter, condition, _context(world))
    try:
        await harness.start()
        loop = await harness.run()
    except ModelError as exc:
        loop = harness.stop("model_error", str(exc))
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a sandbox bug must not end the grid
        loop = harness.stop("infra_error", _reason(exc))
    finally:
        await adapter.aclose()
    try:
        world.settle(cell.limits.settle_s)
    except Exception as exc:  # noqa: BLE001 - a fault's in-flight delivery failed
        loop.termination, loop.reason = "infra_error", _reason(exc)
    return _record(cell, header, _outcome(world, loop, header), started, world, loop)


def _record(cell: Cell, header: dict[str, Any], outcome: dict[str, Any], started: float,
            world: World | None = None, loop: Any = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA, "episode_id": cell.episode_id, "cell": cell.public(),
        "header": header, "outcome": outcome, "report": loop.report if loop else None,
        "events": world.log.events if world else [], "ledger": world.ledger if world else [],
        "usage": loop.usage if loop else [],
        "runtime": {"wall_s": round(stopwatch() - started, 6), **host_facts(),
                    **(loop.runtime if loop else {})},
    }


def _unbuilt_header(cell: Cell) -> dict[str, Any]:
    return {"timing": cell.timing.model_dump(), "limits": cell.limits.model_dump(),
            "prompts": {}, "task_prompt": None, "intents": [], "version": __version__,
            "plan_hash": None}


def _broken_outcome(reason: str) -> dict[str, Any]:
    """The outcome of an episode whose world could not be built: nothing ran."""
    return {**grade([], [], None), "task_success": False, "exactly_once": False,
            "fault_fired": False, "agent_time_s": 0.0, "tool_calls": 0,
            "model_turns": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
            "termination": "infra_error", "termination_reason": reason}


def _outcome(world: World, loop: Any, header: dict[str, Any]) -> dict[str, Any]:
    graded = grade(header["intents"], world.ledger, loop.report, focal_write_class(world))
    costs = [u["cost_usd"] for u in loop.usage]
    return {
        "fault_fired": world.fault.fired,
        **graded,
        "agent_time_s": loop.agent_time_s,
        "tool_calls": loop.tool_calls,
        "model_turns": loop.turns,
        "input_tokens": sum(u["input_tokens"] for u in loop.usage),
        "output_tokens": sum(u["output_tokens"] for u in loop.usage),
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),
        "termination": loop.termination,
        "termination_reason": loop.reason,
    }


def regrade(record: dict[str, Any]) -> dict[str, Any]:
    """The graded fields of a stored record, recomputed from its log alone."""
    return grade(record["header"]["intents"], record["ledger"], record["report"],
                 record["outcome"]["focal_write_class"])


def run_episode(cell: Cell, adapter: ModelAdapter | None = None) -> dict[str, Any]:
    """Synchronous wrapper of :func:`arun_episode`."""
    return asyncio.run(arun_episode(cell, adapter))
