"""The timeout group: five modes in which the agent sees the same timeout at t0 + 30 s.

They differ only in what happened to the request behind the timeout — never sent, committed at
once, committed 90 s or a heavy-tailed δ after the timeout, or committed at once but hidden
from the next read by a stale replica. At the moment the timeout arrives the agent's view is
byte-identical in all five, which is the point: nothing it can see tells them apart.
"""

from __future__ import annotations

from limbo.faults import tail
from limbo.sim.act import Act, At, Fail, Focal, Later, Lose, Span, Stale, Wait, note
from limbo.sim.fault import Fault, fault

LATE_AFTER_TIMEOUT_S = 90.0


class _Timeout(Fault):
    group = "timeout"
    sees = "timeout after the client timeout (30 s)"


def timed_out(call: Focal) -> Act:
    """Hold the call until the client timeout (counted from the call), then time out."""
    yield Wait(call.timing.client_timeout_s)
    return Fail("timeout")


@fault("timeout_pre")
class TimeoutPre(_Timeout):
    family = "not executed"
    families = ("not executed",)
    hidden = "the request never reaches the service"

    def act(self, call: Focal) -> Act:
        yield note(delivered=False)
        return (yield from timed_out(call))


@fault("timeout_post")
class TimeoutPost(_Timeout):
    family = "read-back resolves"
    families = ("read-back resolves",)
    hidden = "commits at normal latency; the response is lost"

    def act(self, call: Focal) -> Act:
        yield note(delivered=True, response_lost=True)
        yield Lose()
        return (yield from timed_out(call))


class _Late(_Timeout):
    family = "late commit"
    families = ("late commit", "read-back cannot")

    def delay_after_timeout(self, call: Focal) -> float:
        raise NotImplementedError

    def act(self, call: Focal) -> Act:
        delay = self.delay_after_timeout(call)
        lands_at = At(call.timing.client_timeout_s, delay)
        yield note(delay_after_timeout_s=Span(delay), lands_at=lands_at)
        yield Later(lands_at)
        return (yield from timed_out(call))


@fault("timeout_late")
class TimeoutLate(_Late):
    hidden = "still in flight; commits 90 s after the timeout is observed"

    def delay_after_timeout(self, call: Focal) -> float:
        return LATE_AFTER_TIMEOUT_S


@fault("timeout_late_tail")
class TimeoutLateTail(_Late):
    hidden = "still in flight; commits a heavy-tailed δ in [40 s, 2 h] after the timeout"

    def delay_after_timeout(self, call: Focal) -> float:
        return tail.draw(call.rng)


@fault("stale_readback")
class StaleReadback(_Timeout):
    family = "read-back cannot"
    families = ("read-back cannot",)
    hidden = "commits at normal latency; the next read on that service comes from a stale replica"

    def act(self, call: Focal) -> Act:
        yield note(delivered=True, response_lost=True, stale_for_next_read=True)
        yield Stale()
        yield Lose()
        return (yield from timed_out(call))
