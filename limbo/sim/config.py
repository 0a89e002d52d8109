"""Sim-time costs and episode limits: the defaults, in one place.

Both are recorded in every episode header, and a grid may override any field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from limbo.base.memo import per_object

EPISODE_TIMEOUT_S = 3600.0
"""Default wall-clock limit of one episode (``--episode-timeout``): an hour, so that only a hang
reaches it (forty turns of a real model at a minute each fit with room to spare)."""


class Timing(BaseModel):
    """What each step costs in simulated seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    think_s: float = Field(4.0, ge=0)
    """Think time of one model turn."""
    read_s: float = Field(0.5, ge=0)
    """Round trip of a read (request + response)."""
    write_s: float = Field(1.0, ge=0)
    """Round trip of a write (request + response)."""
    client_timeout_s: float = Field(30.0, gt=0)
    """A timed-out call returns to the agent this long after it was issued."""
    max_wait_s: float = Field(3600.0, gt=0)
    """Largest argument the ``wait`` tool accepts."""


class Limits(BaseModel):
    """Caps that end an episode with a typed termination reason."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model_turns: int = Field(40, gt=0)
    tool_calls: int = Field(60, gt=0)
    agent_time_s: float = Field(3 * 3600.0, gt=0)
    settle_s: float = Field(2 * 3600.0 + 180.0, gt=0)
    """How long after the agent stops the clock runs on for in-flight requests to land."""


def dumped(settings: Timing | Limits) -> dict[str, Any]:
    """``settings.model_dump()``, computed once per object (every episode header holds both;
    the cells of a grid, and of a chunk sent to a worker, share one of each); a fresh dict each
    call, so a caller may change it."""
    return dict(_dumped(settings))


@per_object
def _dumped(settings: Timing | Limits) -> dict[str, Any]:
    return settings.model_dump()
