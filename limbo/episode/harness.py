"""The harness protocol: the agent loop that carries a model through one episode.

The episode runner knows a harness only through this protocol: it builds one with the world,
the adapter, the condition and the adapter's context, calls :meth:`Harness.start`, awaits
:meth:`Harness.run` for the result, and calls :meth:`Harness.stop` when something outside the
loop ends the episode (a provider that failed after retries, a bug in the sandbox). A
production harness (a CLI driven over MCP) implements the same three methods, so the episode
never reaches into a harness's internals.

A harness registers with :func:`harness`, which names it and checks that the class has the
protocol's methods. Whether it can run on this machine is the class's own answer,
:meth:`Harness.availability`: ``(True, what was found)`` or ``(False, why not and how to fix
it)`` — a binary that is not installed, a version that does not match. Grid expansion asks it
once per harness and drops an unavailable harness's cells with the reason, counted — so a grid
may name a harness this machine cannot run, and a harness a plugin registers is a harness like
any other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from limbo.base.errors import UsageError
from limbo.base.registry import lookup, registrar
from limbo.sim.events import Termination

if TYPE_CHECKING:
    from limbo.episode.condition import Condition
    from limbo.episode.models import EpisodeContext, ModelAdapter
    from limbo.sim.world import World

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

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """Whether this harness can run on this machine: ``(True, what was found)`` or
        ``(False, why not and what to install)``. Asked once per grid expansion (and by
        ``limbo list harnesses``), so it may look for a binary."""


METHODS = ("start", "run", "stop", "availability")


def _check_protocol(cls: type) -> None:
    missing = [m for m in METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise UsageError(f"harness {getattr(cls, 'name', '?')!r}: {cls.__module__}."
                         f"{cls.__qualname__} does not implement limbo.episode.harness.Harness "
                         f"(missing: {', '.join(missing)})")


harness = registrar("harness", object, prepare=_check_protocol)
"""Class decorator: ``@harness("minimal")`` registers a class implementing :class:`Harness`
under that name."""


def availability(name: str) -> tuple[bool, str]:
    """Harness ``name``'s own answer to whether it can run here, on one line. A check that
    fails, or answers something other than ``(bool, str)``, is a :class:`UsageError` naming
    the harness."""
    cls = lookup("harness", name)
    try:
        answer = cls.availability()
    except Exception as exc:  # noqa: BLE001 - a plugin's check, reported in one line
        raise UsageError(f"harness {name}: checking whether it can run failed: "
                         f"{type(exc).__name__}: {exc}") from None
    if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], bool)
            and isinstance(answer[1], str)):
        raise UsageError(f"harness {name}: availability() must return (bool, str), "
                         f"not {answer!r:.80}")
    return answer[0], " ".join(answer[1].split()) or "no reason given"


def unavailable(name: str) -> str | None:
    """Why harness ``name`` cannot run on this machine (``None``: it can)."""
    ok, detail = availability(name)
    return None if ok else detail
