"""The fault on the focal write, on the wall clock: the mode's act (:mod:`limbo.sim.act`), the
same code the sandbox runs, with the upstream in place of the simulated service.

Each step means here what it means in the sandbox, on the wall clock and every duration times
the ``--time-scale``: ``Send`` forwards the write and waits for the upstream (a cut batch
forwards only its first k units, nothing when k is 0; a dry send answers the world file's
success shape with a fresh id and forwards nothing), ``Lose`` forwards it and lets nobody wait,
``Later`` forwards it at its moment — never before the act has answered the call, so a copy
follows its original — even after the agent has finished (the episode waits for it), ``Wait``
holds the call (answered early when the agent finishes or cancels: nobody is left to wait),
``Stale`` hides the write from the next read of its service. The proxy has no simulated wire: a
``RoundTrip`` costs nothing and half a trip is no time. The failures are the sandbox's bytes
(:func:`limbo.sim.responses.failure`); the fault event carries the act's own detail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol, cast

from limbo.base.errors import InfraError
from limbo.proxy.declared import DeclaredTool
from limbo.proxy.plan import FaultPlan
from limbo.proxy.shapes import raw, result_of
from limbo.sim.act import (
    HALF_TRIP,
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
)
from limbo.sim.config import Timing
from limbo.sim.readback import resolve
from limbo.sim.responses import failure
from limbo.sim.service import fits
from limbo.sim.tasks import fill
from limbo.sim.tools import KEY_FIELD


class FaultHost(Protocol):
    """What a fault acts through: the episode's session (:class:`limbo.proxy.session.Session`)
    with its plan and wall clock, its event log, the upstream, and a place for work that
    outlives the call."""

    plan: FaultPlan
    stale: tuple[str, DeclaredTool, dict[str, Any], float] | None

    def now(self) -> float: ...

    def emit(self, type_: str, **fields: Any) -> None: ...

    async def forward(self, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
                      attempt: str) -> dict[str, Any]: ...

    async def deliver(self, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
                      attempt: str) -> tuple[int, dict[str, Any]]: ...

    def later(self, work: Coroutine[Any, Any, Any]) -> None: ...

    async def hold(self, until: float, stop: asyncio.Event | None = None) -> None: ...

    def arrival(self, n: int, request_id: str, attempt: str, tool: str) -> None: ...


async def inject(session: FaultHost, tool: DeclaredTool, wire: str, args: dict[str, Any],
                 request_id: str, stop: asyncio.Event | None = None) -> dict[str, Any]:
    """The agent's answer to the focal write under the plan's fault (``stop``: the agent
    cancelled the call; a held answer is then given at once)."""
    plan = session.plan
    batch = tool.op.batch
    units = args.get(batch.units) if batch is not None else None
    call = Focal(tool.name, tool.op.service,
                 (len(units) if isinstance(units, list) else 0) if batch is not None else None,
                 Timing(), plan.rng("fault"))
    run = _Run(session, tool, wire, args, request_id, stop)
    steps = plan.fault.unbound().act(call)
    reply: Any = None
    try:
        while True:
            reply = await run.step(steps.send(reply))
    except StopIteration as done:
        answer = done.value
    finally:
        run.answered.set()
    if isinstance(answer, Fail):
        timing = Timing(client_timeout_s=plan.client_timeout_s)
        return result_of(failure(answer.kind, timing), error=True)
    return cast(dict[str, Any], answer)


class _Run:
    """One act on the focal write: each step, on the wall clock."""

    def __init__(self, session: FaultHost, tool: DeclaredTool, wire: str, args: dict[str, Any],
                 request_id: str, stop: asyncio.Event | None) -> None:
        self.session, self.tool, self.wire, self.args = session, tool, wire, args
        self.request_id, self.stop = request_id, stop
        self.t0 = session.now()
        self.answered = asyncio.Event()
        """Set when the act has answered the call: a later delivery waits for it."""

    async def step(self, step: Step) -> Any:
        s, scale = self.session, self.session.plan.scale
        if isinstance(step, Note):
            s.emit("fault", mode=s.plan.mode, request_id=self.request_id,
                   detail={k: self.render(v) for k, v in step.detail.items()})
        elif isinstance(step, Send):
            return await self.send(step)
        elif isinstance(step, Lose):
            s.later(s.forward(self.tool, self.wire, self.args, self.request_id, "original"))
        elif isinstance(step, Later):
            s.later(self.late(self.render(step.at), step.attempt or "original"))
        elif isinstance(step, Wait):
            await s.hold(s.now() + step.seconds * scale, self.stop)
        elif isinstance(step, Stale):
            s.stale = (self.tool.op.service, self.tool, self.args, self.t0)
        elif not isinstance(step, RoundTrip):  # no simulated wire: a round trip costs nothing
            raise InfraError(f"fault {s.plan.mode!r} yielded {step!r}, not a step of "
                             f"limbo.sim.act")
        return None

    async def send(self, step: Send) -> Any:
        s, args = self.session, self.args
        if step.dry:
            return _phantom(s, self.tool, args)
        if step.cut is not None:
            batch = self.tool.op.batch
            assert batch is not None
            if not step.cut:
                return None
            args = {**args, batch.units: args[batch.units][:step.cut]}
        return await s.forward(self.tool, self.wire, args, self.request_id, "original")

    def render(self, value: Any) -> Any:
        """A step's time on the wall clock, scaled (a moment from when the call arrived)."""
        scale = self.session.plan.scale
        if isinstance(value, Span):
            return round(value.seconds * scale, 6)
        if not isinstance(value, At):
            return value
        t = self.t0
        for term in value.terms:
            t += 0.0 if term == HALF_TRIP else float(term) * scale
        return round(t, 6)

    async def late(self, at: float, attempt: str) -> None:
        """Forward the write at ``at`` (not before the call is answered), and log where it
        landed."""
        s = self.session
        await asyncio.sleep(max(0.0, at - s.now()))
        await self.answered.wait()
        n, _ = await s.deliver(self.tool, self.wire, self.args, self.request_id, attempt)
        s.arrival(n, self.request_id, attempt, self.tool.name)


def _phantom(session: FaultHost, tool: DeclaredTool, args: dict[str, Any]) -> dict[str, Any]:
    """The success the world file says this write answers, with a fresh id: nothing was sent."""
    assert tool.write is not None and tool.write.result is not None
    env = _Blank({k: v for k, v in args.items() if k != KEY_FIELD})
    env["id"] = session.plan.phantom_id()
    return result_of(fill(tool.write.result, env), structured=True)


class _Blank(dict[str, Any]):
    """An optional argument the call left out fills its placeholder with ``null``."""

    def __missing__(self, key: str) -> None:
        return None


def staled(session: FaultHost, result: dict[str, Any], read: DeclaredTool) -> dict[str, Any]:
    """``result`` of the first read of the focal write's service after ``stale_readback``,
    without the items that show the focal write: the read a stale replica would answer."""
    assert session.stale is not None
    _, focal, args, t0 = session.stale
    session.stale = None
    plan = resolve(focal.op, {k: v for k, v in args.items() if k != KEY_FIELD})
    session.emit("fault", mode=session.plan.mode, request_id=f"read:{read.name}",
                 detail={"stale_as_of": t0})
    if plan is None:
        return result
    shown = [plan.spec.match] if plan.units is None else [
        {**plan.spec.match, **u} for u in plan.units]

    def drop(item: Any) -> bool:
        return isinstance(item, dict) and any(fits(item, s) for s in shown)

    body = raw(result)
    hidden = ([v for v in body if not drop(v)] if isinstance(body, list)
              else _without(body, drop) if isinstance(body, dict) else None)
    return result if hidden is None else _answer_like(result, hidden)


def _without(body: dict[str, Any], drop: Any) -> dict[str, Any] | None:
    """``body`` with the matching items left out of its item list (``None``: it has none)."""
    for key, value in body.items():
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return {**body, key: [v for v in value if not drop(v)]}
    for key, value in body.items():
        if isinstance(value, dict):
            inner = _without(value, drop)
            if inner is not None:
                return {**body, key: inner}
    return None


def _answer_like(result: dict[str, Any], body: Any) -> dict[str, Any]:
    """An MCP result carrying ``body`` the way ``result`` carried its own."""
    return result_of(body, bool(result.get("isError")),
                     structured=isinstance(result.get("structuredContent"), dict))
