"""The typed event log of one episode.

Every event is a flat JSON object with the sim time ``t`` and a ``type`` from
:data:`EVENT_TYPES`. Agent-visible events (``turn``, ``call``, ``result``) and hidden ones
(``fault``, ``commit``, ``arrival``, ``replay``, ``lagged_read``, ``condition``, ``guard``,
``clock``) share one ordered list, so a timeline can show both sides at once.
"""

from __future__ import annotations

from typing import Any

import simpy

EVENT_TYPES = frozenset({
    "turn",       # a model turn: what it said and which tools it called
    "call",       # a tool call as the agent issued it
    "result",     # the tool result the agent received
    "fault",      # a fault fired, with what it will do
    "commit",     # an effect committed (index into the ledger)
    "arrival",    # a request reached a service (in-flight, redelivered or original)
    "replay",     # an idempotency key answered a request without acting
    "lagged_read",  # a lagging or stale read could not see effects that had committed
    "condition",  # a scaffold condition acted (retried, read, told the model)
    "guard",      # a guard decision
    "clock",      # the clock advanced for waiting or settling
    "finish",     # the agent's final report
    "limit",      # a limit ended the episode
})
VISIBLE_TYPES = frozenset({"turn", "call", "result", "finish"})


class EventLog:
    """An append-only list of events stamped with the sim time."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.events: list[dict[str, Any]] = []

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        assert type_ in EVENT_TYPES, f"unknown event type {type_!r}"  # a closed set, as documented
        event = {"t": self.env.now, "type": type_, **fields}
        self.events.append(event)
        return event
