"""Modes that answer at the normal round trip with a failure: 500, reset, 429, partial batch.

``http500_pre`` and ``http500_post`` (and ``partial_batch`` on a batch write) are one
observation-equivalence group: the same 500 at t0 + 1 s, whether nothing, everything or the
first k rows committed. ``conn_reset_post`` and ``throttle_pre`` look like nothing else.
"""

from __future__ import annotations

from limbo.base.errors import InfraError
from limbo.sim.act import Act, Fail, Focal, RoundTrip, Send, note
from limbo.sim.fault import Fault, fault
from limbo.sim.responses import RETRY_AFTER_S


@fault("http500_pre")
class Http500Pre(Fault):
    family = "not executed"
    families = ("not executed",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip"
    hidden = "the request never reaches the service"

    def act(self, call: Focal) -> Act:
        yield note(delivered=False)
        yield RoundTrip()
        return Fail("server_error")


@fault("http500_post")
class Http500Post(Fault):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip"
    hidden = "commits; the 500 is sent after the effect"

    def act(self, call: Focal) -> Act:
        yield note(delivered=True)
        yield Send()
        return Fail("server_error")


@fault("conn_reset_post")
class ConnResetPost(Fault):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = None
    sees = "connection reset at the normal round trip"
    hidden = "commits; the connection drops before the response is read"

    def act(self, call: Focal) -> Act:
        yield note(delivered=True)
        yield Send()
        return Fail("connection_reset")


@fault("throttle_pre")
class ThrottlePre(Fault):
    family = "not executed"
    families = ("not executed",)
    group = None
    sees = f"HTTP 429 with retry_after_s = {RETRY_AFTER_S:g}"
    hidden = "the request is refused before it reaches the service"

    def act(self, call: Focal) -> Act:
        yield note(delivered=False)
        yield RoundTrip()
        return Fail("rate_limited")


@fault("partial_batch")
class PartialBatch(Fault):
    family = "read-back resolves"
    families = ("read-back resolves",)
    group = "server_error"
    sees = "HTTP 500 at the normal round trip (batch writes only)"
    hidden = "the first k of n rows commit, 1 <= k < n, k drawn from the seed"
    batch_only = True

    def act(self, call: Focal) -> Act:
        if call.units is None:
            raise InfraError(f"partial_batch cannot act on {call.tool}: not a batch write")
        n = call.units
        # A one-row batch cannot stop part-way: then nothing commits (k = 0), like http500_pre.
        k = call.rng.randint(1, n - 1) if n >= 2 else 0
        yield note(k=k, n=n)
        yield Send(cut=k)
        return Fail("server_error")
