"""The timeout group: five modes in which the agent sees the same timeout at t0 + 30 s.

They differ only in what happened to the request behind the timeout — never sent, committed at
once, committed 90 s or a heavy-tailed δ after the timeout, or committed at once but hidden
from the next read by a stale replica. At the moment the timeout arrives the agent's view is
byte-identical in all five, which is the point: nothing it can see tells them apart.
"""

from __future__ import annotations

from limbo.faults import tail
from limbo.sim import responses
from limbo.sim.boundary import Process, Transport
from limbo.sim.fault import Fault, FaultContext, fault
from limbo.sim.request import Request

LATE_AFTER_TIMEOUT_S = 90.0


class _Timeout(Fault):
    group = "timeout"
    sees = "timeout after the client timeout (30 s)"

    def timed_out(self) -> Process:
        """Hold the call until the client timeout (counted from the call), then time out."""
        yield self.after(self.timing.client_timeout_s)
        return responses.timeout(self.timing)


@fault("timeout_pre")
class TimeoutPre(_Timeout):
    family = "not executed"
    families = ("not executed",)
    hidden = "the request never reaches the service"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=False)
        return (yield from self.timed_out())


@fault("timeout_post")
class TimeoutPost(_Timeout):
    family = "read-back resolves"
    families = ("read-back resolves",)
    hidden = "commits at normal latency; the response is lost"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=True, response_lost=True)
        self.background(req)
        return (yield from self.timed_out())


class _Late(_Timeout):
    family = "late commit"
    families = ("late commit", "read-back cannot")

    def delay_after_timeout(self) -> float:
        raise NotImplementedError

    def inject(self, req: Request) -> Process:
        delay = self.delay_after_timeout()
        lands_at = req.issued_at + self.timing.client_timeout_s + delay
        self.emit(req, delay_after_timeout_s=delay, lands_at=lands_at)
        self.deliver_at(req, lands_at)
        return (yield from self.timed_out())


@fault("timeout_late")
class TimeoutLate(_Late):
    hidden = "still in flight; commits 90 s after the timeout is observed"

    def delay_after_timeout(self) -> float:
        return LATE_AFTER_TIMEOUT_S


@fault("timeout_late_tail")
class TimeoutLateTail(_Late):
    hidden = "still in flight; commits a heavy-tailed δ in [40 s, 2 h] after the timeout"

    def delay_after_timeout(self) -> float:
        return tail.draw(self.ctx.rng)


@fault("stale_readback")
class StaleReadback(_Timeout):
    family = "read-back cannot"
    families = ("read-back cannot",)
    hidden = "commits at normal latency; the next read on that service comes from a stale replica"

    def __init__(self, ctx: FaultContext, inner: Transport) -> None:
        super().__init__(ctx, inner)
        self._stale: tuple[str, float] | None = None
        """(service, as-of time) of the read still to be served stale."""

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=True, response_lost=True, stale_for_next_read=True)
        self._stale = (req.op.service, req.issued_at)
        self.background(req)
        return (yield from self.timed_out())

    def passthrough(self, req: Request) -> Process:
        if self._stale is not None and req.op.kind == "read" and req.op.service == self._stale[0]:
            as_of = self._stale[1]
            self._stale = None
            self.emit(req, stale_as_of=as_of)
            req = req.but(stale_as_of=as_of)
        return (yield from self.inner.handle(req))
