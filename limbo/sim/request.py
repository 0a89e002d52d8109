"""A validated tool call on its way through the boundary."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from limbo.sim.service import OpSpec


@dataclass(frozen=True, slots=True)
class Request:
    """What travels from the boundary to a service.

    ``args`` are the validated arguments without the key. The last three fields are how the
    transport layer (faults) shapes delivery without reaching into a service: a dry run
    answers without committing (an acknowledgement for a dropped request), ``stale_as_of``
    makes a read answer from a replica frozen at that time, and ``cut_after`` stops a batch
    once that many rows have committed.
    """

    id: str
    op: OpSpec
    args: dict[str, Any]
    key: str | None
    attempt: str
    issued_at: float
    dry_run: bool = False
    stale_as_of: float | None = None
    cut_after: int | None = None
    round_trip_s: float | None = None
    """This call's round trip when its write declares a latency (a world file's
    ``latency_s``); ``None``: the grid's timing."""

    def round_trip(self, default_s: float) -> float:
        """The call's round trip: its own, or ``default_s`` (the grid's)."""
        return default_s if self.round_trip_s is None else self.round_trip_s

    def but(self, **changes: Any) -> Request:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)
