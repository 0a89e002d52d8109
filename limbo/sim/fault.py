"""What a fault mode is: its metadata, its act, and the transport that runs the act on the
simpy boundary, wrapping the one inside it and firing once.

A fault fires on the *focal write* — the first call to the cell's focal operation — and passes
every other call through untouched (a mode may still shape later calls through
:meth:`Fault.passthrough`, as ``stale_readback`` does for one read). What it does on the focal
write is its act (:mod:`limbo.sim.act`), run here on simulated time and by
:mod:`limbo.proxy.inject` on the wall clock; the service never learns that a fault is active.

Requests that a mode delivers *later* than the agent's call (late commits, redelivered copies)
go through :meth:`Fault.deliver_at`: they are listed in ``ctx.inflight`` until they land, and
their landing is logged as an ``arrival`` event, so both a scaffold oracle and a timeline can
see them. They are simpy processes of their own, so they land even after the agent has
finished (the world settles the clock).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast, get_args

import simpy

from limbo.base.errors import InfraError, UsageError
from limbo.base.registry import registrar
from limbo.base.rng import Rng
from limbo.sim import responses
from limbo.sim.act import (
    HALF_TRIP,
    Act,
    At,
    Fail,
    Focal,
    Later,
    Lose,
    Note,
    RoundTrip,
    Send,
    Span,
    Stale,
    Step,
    Wait,
    note,
)
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
    """Base fault: the control (``none``), which notes the focal write and sends it. A mode
    overrides :meth:`act` — what it does to the focal write, in steps (:mod:`limbo.sim.act`)
    that this class runs on the simpy boundary and :mod:`limbo.proxy.inject` on the wall clock —
    and registers with :func:`fault`, which names it."""

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
    acknowledges: ClassVar[bool] = False
    """Whether the act answers with a dry run (the success the write would have given): the
    proxy then needs the write's success shape from the world file."""

    def __init__(self, ctx: FaultContext, inner: Transport) -> None:
        self.ctx = ctx
        self.inner = inner
        self.fired = False
        self._stale: tuple[str, float] | None = None
        """(service, as-of time) of the read still to be served stale (:class:`Stale`)."""

    @classmethod
    def applies(cls, op: OpSpec) -> bool:
        """Whether this mode can act on focal write ``op``."""
        return op.kind == "write" and (op.batch is not None or not cls.batch_only)

    @classmethod
    def unbound(cls) -> Fault:
        """An instance standing at no simpy boundary, for another interpreter of its act (the
        proxy's): an act reads only its class and the call it is given."""
        return cls.__new__(cls)

    def act(self, call: Focal) -> Act:
        """What happens to the focal write. The control's: nothing unusual."""
        yield note()
        return (yield Send())

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
        """Every call other than the focal write: untouched, but the first read of the
        service an act made stale (:class:`Stale`) answers from a replica as of the
        focal write."""
        if self._stale is not None and req.op.kind == "read" and req.op.service == self._stale[0]:
            as_of = self._stale[1]
            self._stale = None
            self.emit(req, stale_as_of=as_of)
            req = req.but(stale_as_of=as_of)
        return (yield from self.inner.handle(req))

    def inject(self, req: Request) -> Process:
        """Run the mode's act on the focal write, on simulated time."""
        batch = req.op.batch
        call = Focal(req.op.tool, req.op.service,
                         len(batch.items(req.args)) if batch is not None else None,
                         self.timing, self.ctx.rng)
        steps = self.act(call)
        reply: Any = None
        try:
            while True:
                step = steps.send(reply)
                reply = yield from self._step(step, req)
        except StopIteration as done:
            answer = done.value
        if isinstance(answer, Fail):
            return responses.failure(answer.kind, self.timing)
        return cast(Result, answer)

    def _step(self, step: Step, req: Request) -> Generator[simpy.Event, Any, Any]:
        """One step of an act on the simpy boundary; its value goes back to the act."""
        if isinstance(step, Note):
            self.emit(req, **{k: self._render(v, req) for k, v in step.detail.items()})
        elif isinstance(step, Send):
            sent = req if step.cut is None else req.but(cut_after=step.cut)
            return (yield from self.inner.handle(sent.but(dry_run=True) if step.dry else sent))
        elif isinstance(step, Lose):
            self.env.process(self.inner.handle(req))
        elif isinstance(step, Later):
            at = self._render(step.at, req)
            self.deliver_at(req if step.attempt is None else req.but(attempt=step.attempt), at)
        elif isinstance(step, Wait):
            yield self.after(step.seconds)
        elif isinstance(step, RoundTrip):
            yield self.after(req.round_trip(self.timing.write_s))
        elif isinstance(step, Stale):
            self._stale = (req.op.service, req.issued_at)
        else:
            raise InfraError(f"fault {self.name!r} yielded {step!r}, not a step of limbo.sim.act")
        return None

    def _render(self, value: Any, req: Request) -> Any:
        """A step's time in the sandbox's clock: a moment from the call's issue time."""
        if isinstance(value, Span):
            return value.seconds
        if not isinstance(value, At):
            return value
        t = req.issued_at
        for term in value.terms:
            t = t + (req.round_trip(self.timing.write_s) / 2 if term == HALF_TRIP
                     else float(term))
        return t

    def emit(self, req: Request, **detail: Any) -> None:
        """Record that the fault fired, and what it will do (hidden from the agent)."""
        self.ctx.log.emit("fault", mode=self.name, request_id=req.id, detail=detail)

    def after(self, seconds: float) -> simpy.Event:
        """An event ``seconds`` of sim time from now (for ``yield``)."""
        return self.env.timeout(seconds)

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
