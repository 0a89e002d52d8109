"""The agent-visible failures the fault modes return, one function per kind.

Every mode of an observation-equivalence group returns its failure from here, so the bytes an
agent sees cannot drift apart between, say, ``timeout_pre`` and ``timeout_late``: the message
depends only on the timing, never on what the mode did behind it.
"""

from __future__ import annotations

from limbo.sim.config import Timing
from limbo.sim.results import Result, error

RETRY_AFTER_S = 20.0


def timeout(timing: Timing) -> Result:
    """The client gave up waiting; the request may or may not have been processed."""
    return error("timeout", f"no response within {timing.client_timeout_s:g} s; "
                            "the request may or may not have been processed")


def server_error() -> Result:
    """An HTTP 500 from the service."""
    return error("server_error", "internal server error")


def connection_reset() -> Result:
    """The connection dropped before the response was read."""
    return error("connection_reset", "connection reset by peer before the response was received")


def rate_limited() -> Result:
    """An HTTP 429 with a ``retry_after_s`` hint."""
    return error("rate_limited", "too many requests; retry later",
                 retry_after_s=RETRY_AFTER_S)


def failure(kind: str, timing: Timing) -> Result:
    """The failure an act names (:class:`limbo.sim.act.Fail`), as the agent receives it."""
    if kind == "timeout":
        return timeout(timing)
    return {"server_error": server_error, "connection_reset": connection_reset,
            "rate_limited": rate_limited}[kind]()
