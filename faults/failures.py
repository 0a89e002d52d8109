"""Modes that answer at the normal round trip with a failure: 500, reset, 429, partial batch.

``http500_pre`` and ``http500_post`` (and ``partial_batch`` on a batch write) are one
observation-equivalence group: the same 500 at t0 + 1 s, whether nothing, everything or the
first k rows committed. ``conn_reset_post`` and ``throttle_pre`` look like nothing else.
"""

from __future__ import annotations

from limbo.base.errors import InfraError
from limbo.sim import responses
from limbo.sim.boundary import Process
from limbo.sim.fault import Fault, fault
from limbo.sim.request import Request
from limbo.sim.results import Result


class _RoundTrip(Fault):
    def dropped(self, req: Request, answer: Result) -> Process:
        """The request is lost on the way; ``answer`` comes back after a normal round trip
        (the call's own, when its write declares one)."""
        yield self.after(req.round_trip(self.timing.write_s))
        return answer

    def delivered(self, req: Request, answer: Result) -> Process:
        """The request is delivered normally; ``answer`` replaces the service's response."""
        yield from self.inner.handle(req)
        return answer


@fault("http500_pre")
class Http500Pre(_RoundTrip):
    family = "not executed"
    families = ("not executed",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip"
    hidden = "the request never reaches the service"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=False)
        return (yield from self.dropped(req, responses.server_error()))


@fault("http500_post")
class Http500Post(_RoundTrip):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip"
    hidden = "commits; the 500 is sent after the effect"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=True)
        return (yield from self.delivered(req, responses.server_error()))


@fault("conn_reset_post")
class ConnResetPost(_RoundTrip):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = None
    sees = "connection reset at the normal round trip"
    hidden = "commits; the connection drops before the response is read"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=True)
        return (yield from self.delivered(req, responses.connection_reset()))


@fault("throttle_pre")
class ThrottlePre(_RoundTrip):
    family = "not executed"
    families = ("not executed",)
    group = None
    sees = f"HTTP 429 with retry_after_s = {responses.RETRY_AFTER_S:g}"
    hidden = "the request is refused before it reaches the service"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=False)
        return (yield from self.dropped(req, responses.rate_limited()))


@fault("partial_batch")
class PartialBatch(_RoundTrip):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip (batch writes only)"
    hidden = "the first k of n rows commit, 1 <= k < n, k drawn from the seed"
    batch_only = True

    def inject(self, req: Request) -> Process:
        if req.op.batch is None:
            raise InfraError(f"partial_batch cannot act on {req.op.tool}: not a batch write")
        n = len(req.op.batch.items(req.args))
        # A one-row batch cannot stop part-way: then nothing commits (k = 0), like http500_pre.
        k = self.ctx.rng.randint(1, n - 1) if n >= 2 else 0
        self.emit(req, k=k, n=n)
        return (yield from self.delivered(req.but(cut_after=k), responses.server_error()))
