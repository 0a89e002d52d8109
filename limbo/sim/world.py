"""One episode's world: clock, services, contract, ledger, event log and the boundary.

Everything random in it is drawn from generators derived from the cell's seed by component
name, and the only clock is the simpy environment.
"""

from __future__ import annotations

from typing import Any

import simpy

from limbo.base.errors import InfraError
from limbo.base.registry import lookup
from limbo.base.rng import derive_seed, generator
from limbo.sim.boundary import Boundary, ServiceTransport
from limbo.sim.cell import Cell
from limbo.sim.endpoint import Endpoint
from limbo.sim.events import EventLog
from limbo.sim.results import Result, copied
from limbo.sim.service import OpContext, Service
from limbo.sim.tasks import TaskInstance, dig, fill, instantiate
from limbo.sim.tools import ToolSpec, toolset
from limbo.sim.worldfile.kit import kit

PRINCIPAL = "agent"


class World:
    """Builds the world for ``cell``, runs the task's setup, and exposes the boundary."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
        self.env = simpy.Environment()
        self.log = EventLog(self.env)
        self.ledger: list[dict[str, Any]] = []
        self.inflight: list[dict[str, Any]] = []
        self.kit = kit(cell.world)
        self.services: dict[str, Service] = {
            cls.name: cls(derive_seed(cell.seed, f"service.{cls.name}"))
            for cls in self.kit.services
        }
        self.tools: dict[str, ToolSpec] = toolset(cell.contract, self.kit.services)
        self.endpoint = Endpoint(self.services, cell.contract, PRINCIPAL, self.log, self.ledger)
        inner = ServiceTransport(self.env, self.endpoint, cell.timing.read_s, cell.timing.write_s)
        from limbo.sim.fault import FaultContext

        fault_cls = lookup("fault", cell.fault)
        ctx = FaultContext(self.env, self.log, generator(cell.seed, "fault"), cell.timing,
                           cell.focal_write, self.inflight)
        self.fault = fault_cls(ctx, inner)
        latency = generator(cell.seed, "latency") if self.kit.declares_latency else None
        self.boundary = Boundary(self.env, self.log, self.tools, self.fault, cell.timing.max_wait_s,
                                 latency)
        self.task: TaskInstance = instantiate(self.kit.template(cell.template), cell.instance)
        self.vars: dict[str, Any] = copied(self.task.vars)  # the instance is shared
        self._setup()

    def _setup(self) -> None:
        """Prepare the world for the task at t = 0, outside the ledger and the event log."""
        for step in self.task.template.setup:
            spec = self.tools[step.tool]
            assert spec.op is not None
            args = spec.model.model_validate(fill(step.args, self.vars)).model_dump()
            args.pop("idempotency_key", None)
            service = self.services[spec.op.service]
            result: Result = service.call(spec.op.name, OpContext(0.0), args)
            if not result["ok"]:
                raise InfraError(f"setup step {step.id} of {self.cell.template} failed: {result}")
            for name, path in step.save.items():
                self.vars[name] = dig(result, path)

    @property
    def now(self) -> float:
        return float(self.env.now)

    def prompt(self) -> str:
        return self.task.prompt(self.vars)

    def intents(self) -> list[dict[str, Any]]:
        return self.task.intents(self.vars, self.kit.ops)

    def settle(self, limit_s: float) -> float:
        """Run the clock on until nothing is in flight (at most ``limit_s``); returns the time."""
        deadline = self.env.now + limit_s
        start = self.env.now
        while self.env.peek() <= deadline:
            self.env.step()
        if self.env.now > start:
            self.log.emit("clock", reason="settle", seconds=self.env.now - start)
        return float(self.env.now)
