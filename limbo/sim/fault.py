"""The fault seam: a transport that wraps the one inside it and fires once.

A fault fires on the *focal write* — the first call to the cell's focal operation — and passes
every other call through untouched (a mode may still shape later calls through
:meth:`Fault.passthrough`, as ``stale_readback`` does for one read). What it does on the focal
write is its ``inject`` process; the service never learns that a fault is active.

Requests that a mode delivers *later* than the agent's call (late commits, redelivered copies)
go through :meth:`Fault.deliver_at`: they are listed in ``ctx.inflight`` until they land, and
their landing is logged as an ``arrival`` event, so both a scaffold oracle and a timeline can
see them. They are simpy processes of their own, so they land even after the agent has
finished (the world settles the clock).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

import simpy

from limbo.base.errors import UsageError
from limbo.base.registry import registrar
from limbo.base.rng import Rng
from limbo.sim.boundary import Process, Transport
from limbo.sim.config import Timing
from limbo.sim.events import EventLog
from limbo.sim.request import Request
from limbo.sim.results import Result
from limbo.sim.service import OpSpec

Deliver = Callable[[Request], Result]


@dataclass
class FaultContext:
    """What a fault may use: the clock, the log, its own generator, the timing defaults."""

    env: simpy.Environment
    log: EventLog
    rng: Rng
    timing: Timing
    focal_tool: str
    inflight: list[dict[str, Any]]
    """Deliveries scheduled for later (late commits, redelivered copies), shared with the world
    so that a scaffold (the outcome oracle) can see what is still coming. Each entry:
    ``{"request_id", "tool", "args", "key", "lands_at"}``; removed when it lands."""


Family = Literal["none", "not executed", "read-back resolves", "late commit", "read-back cannot",
                 "phantom"]
"""The families the tables group modes by (``none`` is the control)."""
FAMILIES: tuple[Family, ...] = get_args(Family)
Group = Literal["timeout", "server_error", "success"]
"""The observation-equivalence groups: modes whose agent view is identical until the focal
write's response arrives."""
GROUPS: tuple[Group, ...] = get_args(Group)


class Fault:
    """Base fault: passes everything through. Subclasses override :meth:`inject` and register
    with :func:`fault`, which names them."""

    name: ClassVar[str]
    family: ClassVar[Family] = "none"
    """The one family a table puts this mode under (the column of ``faults.md``)."""
    families: ClassVar[tuple[Family, ...]] = ("none",)
    """Every family the mode belongs to (late commits are also "read-back cannot")."""
    group: ClassVar[Group | None] = "success"
    """Observation-equivalence group, or ``None`` when no other mode looks the same."""
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
        return op.kind == "write" and (op.batch is not None or not cls.batch_only)

    @property
    def env(self) -> simpy.Environment:
        return self.ctx.env

    @property
    def timing(self) -> Timing:
        return self.ctx.timing

    def handle(self, req: Request) -> Process:
        if self.fired or req.op.tool != self.ctx.focal_tool:
            return (yield from self.passthrough(req))
        self.fired = True
        return (yield from self.inject(req))

    def passthrough(self, req: Request) -> Process:
        """Every call other than the focal write. The default: untouched."""
        return (yield from self.inner.handle(req))

    def inject(self, req: Request) -> Process:
        """What happens to the focal write. The default: nothing."""
        self.emit(req)
        return (yield from self.inner.handle(req))

    def emit(self, req: Request, **detail: Any) -> None:
        """Record that the fault fired, and what it will do (hidden from the agent)."""
        self.ctx.log.emit("fault", mode=self.name, request_id=req.id, detail=detail)

    # -- helpers for the modes -------------------------------------------------------------

    def after(self, seconds: float) -> simpy.Event:
        """An event ``seconds`` of sim time from now (for ``yield``)."""
        return self.env.timeout(seconds)

    def background(self, req: Request) -> None:
        """Deliver ``req`` normally, but let nobody wait for the response (it is lost)."""
        self.env.process(self.inner.handle(req))

    def deliver_at(self, req: Request, at: float) -> None:
        """Make ``req`` reach its service at sim time ``at``, whatever the agent does meanwhile.

        Listed in ``ctx.inflight`` until it lands; its landing is logged as an ``arrival``.
        """
        entry = {"request_id": req.id, "tool": req.op.tool, "args": req.args, "key": req.key,
                 "lands_at": at}
        self.ctx.inflight.append(entry)
        self.env.process(self._land(req, at, entry))

    def _land(self, req: Request, at: float, entry: dict[str, Any]) -> Process:
        yield self.after(max(0.0, at - self.env.now))
        inflight = self.ctx.inflight
        del inflight[next(i for i, e in enumerate(inflight) if e is entry)]
        mark = len(self.ctx.log.events)
        result = far_end(self.inner)(req)
        outcome = arrival_outcome(req, result, self.ctx.log.events[mark:])
        self.ctx.log.emit("arrival", request_id=req.id, attempt=req.attempt, tool=req.op.tool,
                          outcome=outcome)
        return result


def _check_metadata(cls: type[Fault]) -> None:
    """The closed sets a table and the equivalence sweep rely on."""
    where = f"fault {cls.name!r} ({cls.__module__}.{cls.__qualname__})"
    families = tuple(cls.families)
    for value in (cls.family, *families):
        if value not in FAMILIES:
            raise UsageError(f"{where}: family {value!r} is not one of: {', '.join(FAMILIES)}")
    if cls.family not in families:
        raise UsageError(f"{where}: family {cls.family!r} must be one of its families {families}")
    if cls.group is not None and cls.group not in GROUPS:
        raise UsageError(f"{where}: group {cls.group!r} is not one of: {', '.join(GROUPS)} "
                         f"(or None)")


fault = registrar("fault", Fault, prepare=_check_metadata)
"""Class decorator: ``@fault("timeout_pre")`` registers a :class:`Fault` subclass as that
mode."""


def far_end(transport: Any) -> Deliver:
    """The endpoint's ``deliver`` at the end of a transport chain.

    A delayed delivery has no one waiting for its response, so it skips the wire latency and
    hands the request to the contract layer (the endpoint) at the moment it arrives — exactly
    what the innermost transport does, minus the two half trips. The endpoint is still in
    front of the service, so a fault never reaches inside one.
    """
    node = transport
    while not hasattr(node, "endpoint"):
        node = node.inner
    return node.endpoint.deliver  # type: ignore[no-any-return]


def arrival_outcome(req: Request, result: Result, events: list[dict[str, Any]]) -> str:
    """What a delivery did, from its result and the events the endpoint logged for it."""
    mine = [e for e in events if e.get("request_id") == req.id and e.get("attempt") == req.attempt]
    if not result.get("ok") and result["error"]["kind"] == "idempotency_mismatch":
        return "rejected"
    if any(e["type"] == "replay" for e in mine) or result.get("idempotent_replayed"):
        return "replayed"
    if any(e["type"] == "commit" for e in mine):
        return "committed"
    return "no_effect"
