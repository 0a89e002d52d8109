"""The harness protocol: the agent loop that carries a model through one episode.

The episode runner knows a harness only through this protocol: it builds one with the world,
the adapter, the condition and the adapter's context, calls :meth:`Harness.start`, awaits
:meth:`Harness.run` for the result, and calls :meth:`Harness.stop` when something outside the
loop ends the episode (a provider that failed after retries, a bug in the sandbox). A
production harness (a CLI driven over MCP) implements the same three methods, so the episode
never reaches into a harness's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

if TYPE_CHECKING:
    from limbo.adapter import EpisodeContext, ModelAdapter
    from limbo.harnesses.conditions import Condition
    from limbo.world import World

Termination = Literal["finished", "turn_limit", "time_limit", "tool_limit", "model_error",
                      "infra_error", "timeout"]
"""Why an episode ended. ``finished``: the agent finished (or stopped calling tools);
``*_limit``: a cap of the cell's limits; ``model_error``: the provider failed after retries;
``infra_error``: a bug or broken invariant in the sandbox, an adapter or a harness;
``timeout``: the episode ran past its wall-clock limit."""

TERMINATIONS: tuple[str, ...] = get_args(Termination)


@dataclass
class LoopResult:
    """What a harness hands back: how the loop ended, the agent's report, and its costs."""

    termination: Termination = "finished"
    report: dict[str, Any] | None = None
    turns: int = 0
    tool_calls: int = 0
    usage: list[dict[str, Any]] = field(default_factory=list)
    agent_time_s: float = 0.0
    reason: str | None = None
    runtime: dict[str, Any] = field(default_factory=dict)
    """Facts of this run that may differ between runs of the same cell (a production
    harness's own event stream, its stderr, wall times); they go to the record's ``runtime``."""


@runtime_checkable
class Harness(Protocol):
    """One episode's agent loop. Built as ``cls(world, adapter, condition, ctx)``."""

    def __init__(self, world: World, adapter: ModelAdapter, condition: Condition,
                 ctx: EpisodeContext) -> None: ...

    async def start(self) -> None:
        """Prepare the loop (a production harness starts its process here)."""

    async def run(self) -> LoopResult:
        """Drive the agent until it finishes or a limit ends the episode."""

    def stop(self, reason: Termination, detail: str | None = None) -> LoopResult:
        """End the episode from outside the loop with ``reason``; the result so far."""
