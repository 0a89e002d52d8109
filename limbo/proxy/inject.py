"""The fault on the focal write, on the wall clock (the plan is :mod:`limbo.proxy.plan`'s).

Each mode does what it does in the sandbox (docs/faults.md), with the upstream in place of the
simulated service: a ``timeout`` is answered the client timeout after the call arrived, whether
the write was never sent (``timeout_pre``), committed at once (``timeout_post``,
``stale_readback``) or is still to be sent (``timeout_late``, ``timeout_late_tail``: forwarded
δ after the timeout, even after the agent has finished — the episode waits for it). A held
call is answered early when the agent finishes or goes: nobody is left to wait for it. A 500 or a
reset comes after the upstream answered (``*_post``), or at once when the write is dropped
(``*_pre``, ``throttle_pre``). ``partial_batch`` forwards only the first k units;
``redelivery`` answers the upstream's answer, then forwards the same call again (attempt
``redelivered``) after the copy delay; ``phantom_success`` answers the world file's success
shape and forwards nothing. The failures are the sandbox's own bytes
(:mod:`limbo.sim.responses`); the fault event carries the same details as the sandbox's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from limbo.proxy.declared import DeclaredTool
from limbo.proxy.plan import FaultPlan
from limbo.proxy.shapes import raw, result_of
from limbo.sim import responses
from limbo.sim.config import Timing
from limbo.sim.readback import resolve
from limbo.sim.results import Result
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


def _failure(session: FaultHost, kind: str) -> Result:
    if kind == "timeout":
        return responses.timeout(Timing(client_timeout_s=session.plan.client_timeout_s))
    return {"server_error": responses.server_error, "connection_reset": responses.connection_reset,
            "rate_limited": responses.rate_limited}[kind]()


async def inject(session: FaultHost, tool: DeclaredTool, wire: str, args: dict[str, Any],
                 request_id: str, stop: asyncio.Event | None = None) -> dict[str, Any]:
    """The agent's answer to the focal write under the plan's fault (``stop``: the agent
    cancelled the call; a held answer is then given at once)."""
    plan, act = session.plan, session.plan.act
    t0 = session.now()
    hold = act.answer == "timeout"

    def fault(**detail: Any) -> None:
        session.emit("fault", mode=plan.mode, request_id=request_id, detail=detail)

    if act.forward == "never":
        fault(delivered=False, **({"acknowledged": True} if act.answer == "phantom" else {}))
        if act.answer == "phantom":
            return _phantom(session, tool, args)
    elif act.forward == "now" and act.answer == "upstream":  # fault "none"
        fault()
        return await session.forward(tool, wire, args, request_id, "original")
    elif act.forward == "now":
        fault(delivered=True, **({"response_lost": True} if hold else {}),
              **({"stale_for_next_read": True} if act.stale else {}))
        if act.stale:
            session.stale = (tool.op.service, tool, args, t0)
        delivery = session.forward(tool, wire, args, request_id, "original")
        if hold:
            session.later(delivery)  # the answer is lost: the call times out meanwhile
        else:
            await delivery
    elif act.forward == "later":
        delay = plan.late_after_s()
        lands = t0 + plan.client_timeout_s + delay
        fault(delay_after_timeout_s=round(delay, 6), lands_at=round(lands, 6))
        session.later(_late(session, tool, wire, args, request_id, plan.client_timeout_s + delay,
                            "original"))
    elif act.forward == "copy":
        result = await session.forward(tool, wire, args, request_id, "original")
        fault(copy_at=round(session.now() + plan.copy_after_s, 6))
        session.later(_late(session, tool, wire, args, request_id, plan.copy_after_s,
                            "redelivered"))
        return result
    else:  # cut: the first k units of a batch
        await _cut(session, tool, wire, args, request_id, fault)
    if hold:
        await session.hold(t0 + plan.client_timeout_s, stop)  # sooner if the agent finishes
    return result_of(_failure(session, act.answer), error=True)


async def _late(session: FaultHost, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
                after_s: float, attempt: str) -> None:
    """Deliver ``args`` ``after_s`` from now, and log where it landed."""
    await asyncio.sleep(after_s)
    n, _ = await session.deliver(tool, wire, args, request_id, attempt)
    session.arrival(n, request_id, attempt, tool.name)


async def _cut(session: FaultHost, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
               fault: Any) -> None:
    batch = tool.op.batch
    assert batch is not None
    units = args.get(batch.units)
    n = len(units) if isinstance(units, list) else 0
    k = session.plan.cut(n)
    fault(k=k, n=n)
    if k:
        narrowed = {**args, batch.units: units[:k]}  # type: ignore[index]
        await session.forward(tool, wire, narrowed, request_id, "original")


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
