"""The success group's two faults: the agent hears a normal success, and it is not the truth.

``redelivery`` delivers the request a second time (a transport retry the agent never sees);
``phantom_success`` acknowledges a request that is then dropped. Together with ``none`` they are
one observation-equivalence group: the same response at the same time.
"""

from __future__ import annotations

from limbo.sim.boundary import Process
from limbo.sim.fault import Fault, fault
from limbo.sim.request import Request

COPY_AFTER_S = 2.0


@fault("redelivery")
class Redelivery(Fault):
    family = "read-back cannot"
    families = ("read-back cannot",)
    group = "success"
    sees = "the normal success"
    hidden = "a copy arrives 2 s after the original and commits again unless a key dedupes it"

    def inject(self, req: Request) -> Process:
        arrives = req.issued_at + req.round_trip(self.timing.write_s) / 2
        copy_at = arrives + COPY_AFTER_S
        self.emit(req, copy_at=copy_at)
        self.deliver_at(req.but(attempt="redelivered"), copy_at)
        return (yield from self.inner.handle(req))


@fault("phantom_success")
class PhantomSuccess(Fault):
    family = "phantom"
    families = ("phantom",)
    group = "success"
    sees = "the normal success, with a plausible id"
    hidden = "nothing commits: the request is dropped after the acknowledgement"

    def inject(self, req: Request) -> Process:
        self.emit(req, delivered=False, acknowledged=True)
        # A dry run gives the exact response the service would have given, then leaves no trace.
        return (yield from self.inner.handle(req.but(dry_run=True)))
