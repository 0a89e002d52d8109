"""The success group's two faults: the agent hears a normal success, and it is not the truth.

``redelivery`` delivers the request a second time (a transport retry the agent never sees);
``phantom_success`` acknowledges a request that is then dropped. Together with ``none`` they are
one observation-equivalence group: the same response at the same time.
"""

from __future__ import annotations

from limbo.sim.act import HALF_TRIP, Act, At, Focal, Later, Send, note
from limbo.sim.fault import Fault, fault

COPY_AFTER_S = 2.0


@fault("redelivery")
class Redelivery(Fault):
    family = "read-back cannot"
    families = ("read-back cannot",)
    group = "success"
    sees = "the normal success"
    hidden = "a copy arrives 2 s after the original and commits again unless a key dedupes it"

    def act(self, call: Focal) -> Act:
        copy_at = At(HALF_TRIP, COPY_AFTER_S)  # 2 s after the original reaches the service
        yield note(copy_at=copy_at)
        yield Later(copy_at, attempt="redelivered")
        return (yield Send())


@fault("phantom_success")
class PhantomSuccess(Fault):
    family = "phantom"
    families = ("phantom",)
    group = "success"
    sees = "the normal success, with a plausible id"
    hidden = "nothing commits: the request is dropped after the acknowledgement"
    acknowledges = True

    def act(self, call: Focal) -> Act:
        yield note(delivered=False, acknowledged=True)
        # A dry run gives the exact response the service would have given, then leaves no trace.
        return (yield Send(dry=True))
