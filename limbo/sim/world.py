"""One episode's world: clock, services, contract, ledger, event log and the boundary.

Everything random in it is drawn from generators derived from the cell's seed by component
name, and the only clock is the simpy environment.

A harness, a condition and the episode runner see the world through one face — :data:`FACE`:
the cell, the clock (``now``, :meth:`World.advance`), the tools (``specs``,
:meth:`World.validate`, :meth:`World.call`), the event log (:meth:`World.emit`), the task's
prompt and opening facts, the oracle's view of the truth (:meth:`World.truth`), and after the
episode :meth:`World.settle` and one result, :class:`Facts`. Its fields (the simpy
environment, the boundary, the ledger, ...) are the kernel's own: nothing outside
:mod:`limbo.sim` reads them (``tests/test_world_face.py``), so the next change inside the
world breaks no harness.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import simpy

from limbo.base.errors import InfraError
from limbo.base.registry import lookup
from limbo.base.rng import derive_seed, generator
from limbo.sim.boundary import Boundary, ServiceTransport
from limbo.sim.cell import Cell
from limbo.sim.clock import run_until
from limbo.sim.endpoint import Endpoint
from limbo.sim.events import EventLog
from limbo.sim.fault import FaultContext
from limbo.sim.parts import Parts, parts
from limbo.sim.results import Result, copied
from limbo.sim.service import OpContext, Service
from limbo.sim.tasks import LenientEnv, TaskInstance, Template, dig, fill, plan_hash
from limbo.sim.tools import ToolSpec

PRINCIPAL = "agent"

FACE = ("cell", "now", "specs", "validate", "call", "advance", "emit", "prompt", "opening",
        "truth", "settle", "facts")
"""The names of :class:`World` that code outside :mod:`limbo.sim` may use."""


@dataclass(frozen=True)
class Opening:
    """What is fixed before the agent's first turn: the task as the agent and the grader see
    it, and the plan a reference policy follows."""

    prompt: str
    intents: list[dict[str, Any]]
    plan: Template
    plan_hash: str
    vars: dict[str, Any]


@dataclass(frozen=True)
class Facts:
    """What an episode's world leaves behind, for the grader and the record."""

    events: list[dict[str, Any]]
    ledger: list[dict[str, Any]]
    intents: list[dict[str, Any]]
    fault_fired: bool
    focal_class: dict[str, str] | None
    """The write class of the focal write, with the plan's arguments for it (``None``: the plan
    has no step for it)."""


class World:
    """The world of ``cell``, built from its resolved :class:`~limbo.sim.parts.Parts`, with
    the task's setup run. :meth:`of` resolves them by the cell's names."""

    def __init__(self, cell: Cell, parts: Parts) -> None:
        seed, kit = cell.seed, parts.kit
        seeds = {cls.name: derive_seed(seed, f"service.{cls.name}") for cls in kit.services}
        fault_rng = generator(seed, "fault")
        latency = generator(seed, "latency") if kit.declares_latency else None
        self.cell = cell
        self.env = simpy.Environment()
        self.log = EventLog(self.env)
        self.ledger: list[dict[str, Any]] = []
        self.inflight: list[dict[str, Any]] = []
        self.kit = kit
        self.services: dict[str, Service] = {cls.name: cls(seeds[cls.name])
                                             for cls in kit.services}
        self.tools = parts.tools
        self.endpoint = Endpoint(self.services, cell.contract, PRINCIPAL, self.log, self.ledger)
        inner = ServiceTransport(self.env, self.endpoint, cell.timing.read_s, cell.timing.write_s)
        ctx = FaultContext(self.env, self.log, fault_rng, cell.timing, cell.focal_write,
                           self.inflight)
        self.fault = parts.fault(ctx, inner)
        self.boundary = Boundary(self.env, self.log, self.tools, self.fault, cell.timing.max_wait_s,
                                 latency)
        self.task: TaskInstance = parts.task
        self.vars: dict[str, Any] = copied(self.task.vars)  # the instance is shared
        for step in self.task.template.setup:  # at t = 0, outside the ledger and the event log
            spec = self.tools[step.tool]
            assert spec.op is not None
            args = spec.model.model_validate(fill(step.args, self.vars)).model_dump()
            args.pop("idempotency_key", None)
            result: Result = self.services[spec.op.service].call(spec.op.name, OpContext(0.0),
                                                                 args)
            if not result["ok"]:
                raise InfraError(f"setup step {step.id} of {cell.template} failed: {result}")
            for name, path in step.save.items():
                self.vars[name] = dig(result, path)
        template = self.task.template  # what the agent and the grader will be told
        self._opening = Opening(self.task.prompt(self.vars), self.task.intents(self.vars, kit.ops),
                                template, plan_hash(template), dict(self.vars))

    @classmethod
    def of(cls, cell: Cell) -> World:
        """The world of ``cell``, its parts and fault mode looked up by name."""
        return cls(cell, parts(cell, lookup("fault", cell.fault)))

    # -- the face: during the episode ----------------------------------------------------------

    @property
    def now(self) -> float:
        return float(self.env.now)

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        """The agent's tools by name."""
        return self.tools

    def validate(self, tool: str, args: Any) -> tuple[ToolSpec, dict[str, Any]] | Result:
        """``args`` checked against ``tool``'s schema, as the boundary checks a call: the spec
        and the plain arguments, or the ``invalid_argument`` result the agent would get."""
        return self.boundary.validate(tool, args)

    def call(self, tool: str, args: Any, attempt: str | None = None) -> Result:
        """One tool call across the boundary (where the fault acts), the clock running while
        it is in flight."""
        return self.boundary.call(tool, args, attempt=attempt)

    def advance(self, seconds: float) -> None:
        """Run the clock ``seconds`` on (the agent thinking, a scaffold waiting)."""
        run_until(self.env, self.now + seconds)

    @property
    def emit(self) -> Callable[..., dict[str, Any]]:
        """``emit(kind, **fields)`` logs one event of ``kind`` (see :mod:`limbo.sim.events`) at
        the current time. The log's own method, handed out rather than wrapped: an episode
        logs a dozen events, and a wrapper's call and repacking of the fields cost each one
        about as much as the log's checks."""
        return self.log.emit

    def prompt(self) -> str:
        return self._opening.prompt

    def intents(self) -> list[dict[str, Any]]:
        return self._opening.intents

    def opening(self) -> Opening:
        """The task as fixed before the first turn (the record's header, the answer key)."""
        return self._opening

    def truth(self, tool: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What an oracle knows of ``tool``'s writes now: the arguments of each committed
        effect, and of each request still in flight that will land."""
        return ([e["args"] for e in self.ledger if e["tool"] == tool],
                [e["args"] for e in self.inflight if e["tool"] == tool])

    # -- after the episode ---------------------------------------------------------------------

    def settle(self, limit_s: float) -> float:
        """Run the clock on until nothing is in flight (at most ``limit_s``); returns the time."""
        deadline = self.env.now + limit_s
        start = self.env.now
        while self.env.peek() <= deadline:
            self.env.step()
        if self.env.now > start:
            self.log.emit("clock", reason="settle", seconds=self.env.now - start)
        return float(self.env.now)

    def facts(self) -> Facts:
        """The episode's result, as the world holds it now."""
        return Facts(self.log.events, self.ledger, self._opening.intents, self.fault.fired,
                     self._focal_class())

    def _focal_class(self) -> dict[str, str] | None:
        for step in self.task.template.steps:
            if step.tool == self.cell.focal_write:
                spec = self.tools[step.tool]
                assert spec.op is not None
                return self.endpoint.write_class(spec.op, fill(step.args, LenientEnv(self.vars)))
        return None
