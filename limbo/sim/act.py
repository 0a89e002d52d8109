"""What a fault mode does to the focal write, said once for every boundary that runs it.

A mode's *act* (:meth:`limbo.sim.fault.Fault.act`) is a generator: it yields steps — note the
fault, send the write and wait for its answer, lose it, deliver it later, wait, stop the next
read short — and returns what the agent hears: the answer of a :class:`Send`, or a
:class:`Fail` naming one of the agent-visible failures (:mod:`limbo.sim.responses`). It never
touches a clock, a transport or a service. Two interpreters run the same act: the simpy boundary
of the sandbox (:class:`limbo.sim.fault.Fault`, on simulated time) and the proxy in front of a
real API (:mod:`limbo.proxy.inject`, on the wall clock, every duration times ``--time-scale``).
They differ only in what a step means where they stand — the proxy has no simulated wire, so a
:class:`RoundTrip` costs it nothing and half a trip is no time — which is why times in a step are
kept as :class:`At` and :class:`Span` until an interpreter renders them.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from limbo.base.rng import Rng
from limbo.sim.config import Timing

HALF_TRIP = "half trip"
"""A term of :class:`At`: half the write's round trip, when a sent write reaches the service."""


@dataclass(frozen=True)
class At:
    """A moment: the call's issue time plus ``terms`` (seconds, or :data:`HALF_TRIP`), added
    left to right."""

    terms: tuple[float | str, ...]

    def __init__(self, *terms: float | str) -> None:
        object.__setattr__(self, "terms", terms)


@dataclass(frozen=True)
class Span:
    """A duration in the sandbox's seconds (the proxy scales it)."""

    seconds: float


@dataclass(frozen=True)
class Note:
    """Log that the fault fired, with ``detail`` (hidden from the agent)."""

    detail: dict[str, Any]


@dataclass(frozen=True)
class Send:
    """Deliver the write now and wait for its answer (the step's value). ``cut``: only the
    first ``cut`` units of a batch commit; ``dry``: answer as the service would, commit
    nothing."""

    cut: int | None = None
    dry: bool = False


@dataclass(frozen=True)
class Lose:
    """Deliver the write now; its answer is lost (nobody waits for it)."""


@dataclass(frozen=True)
class Later:
    """Deliver the write at ``at``, whatever the agent does meanwhile; ``attempt`` labels the
    copy (``None``: the call's own label)."""

    at: At
    attempt: str | None = None


@dataclass(frozen=True)
class Wait:
    """Hold the call for ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class RoundTrip:
    """Hold the call for the write's normal round trip (the answer of a dropped request)."""


@dataclass(frozen=True)
class Stale:
    """The next read of the write's service answers without the write's effect."""


Step: TypeAlias = Note | Send | Lose | Later | Wait | RoundTrip | Stale
FailureKind = Literal["timeout", "server_error", "connection_reset", "rate_limited"]


@dataclass(frozen=True)
class Fail:
    """The agent hears this failure (:func:`limbo.sim.responses.failure`)."""

    kind: FailureKind


Act: TypeAlias = Generator[Step, Any, Any]
"""A mode's act: yields steps, returns the answer of a :class:`Send` or a :class:`Fail`."""


@dataclass(frozen=True)
class Focal:
    """The focal write as an act sees it."""

    tool: str
    service: str
    units: int | None
    """How many units the batch write carries; ``None``: not a batch write."""
    timing: Timing
    """The sandbox's timing (in the proxy, unscaled: the proxy scales the steps)."""
    rng: Rng
    """The fault's own generator."""


def note(**detail: Any) -> Note:
    """``yield note(k=3)``: the fault event with that detail."""
    return Note(detail)
