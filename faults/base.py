"""The fault seam: a transport that wraps the one inside it and fires once.

A fault fires on the *focal write* — the first call to the cell's focal operation — and passes
every other call through untouched. What it does there is its ``inject`` process; the service
never learns that a fault is active.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any, ClassVar

import simpy
from limbo.boundary import Process, Transport
from limbo.config import Timing
from limbo.events import EventLog
from limbo.request import Request
from limbo.services import OpSpec


@dataclass
class FaultContext:
    """What a fault may use: the clock, the log, its own generator, the timing defaults."""

    env: simpy.Environment
    log: EventLog
    rng: Random
    timing: Timing
    focal_tool: str
    inflight: list[dict[str, Any]]
    """Deliveries scheduled for later (late commits, redelivered copies), shared with the world
    so that a scaffold (the outcome oracle) can see what is still coming. Each entry:
    ``{"request_id", "tool", "args", "key", "lands_at"}``; removed when it lands."""


class Fault:
    """Base fault: passes everything through. Subclasses override :meth:`inject`."""

    name: ClassVar[str] = "none"
    family: ClassVar[str] = "none"
    group: ClassVar[str] = "success"
    sees: ClassVar[str] = "the normal response"
    hidden: ClassVar[str] = "nothing unusual"
    batch_only: ClassVar[bool] = False

    def __init__(self, ctx: FaultContext, inner: Transport) -> None:
        self.ctx = ctx
        self.inner = inner
        self.fired = False

    @classmethod
    def applies(cls, op: OpSpec) -> bool:
        """Whether this mode can act on focal write ``op``."""
        return op.kind == "write" and (op.batch or not cls.batch_only)

    @property
    def env(self) -> simpy.Environment:
        return self.ctx.env

    def handle(self, req: Request) -> Process:
        if self.fired or req.op.tool != self.ctx.focal_tool:
            return (yield from self.inner.handle(req))
        self.fired = True
        return (yield from self.inject(req))

    def inject(self, req: Request) -> Process:
        """What happens to the focal write. The default: nothing."""
        self.emit(req)
        return (yield from self.inner.handle(req))

    def emit(self, req: Request, **detail: Any) -> None:
        """Record that the fault fired, and what it will do (hidden from the agent)."""
        self.ctx.log.emit("fault", mode=self.name, request_id=req.id, detail=detail)
