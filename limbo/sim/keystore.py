"""The services' idempotency-key store (the contract side, not the guard's).

A key is scoped to (caller, service). Its first use records a fingerprint of the operation and
its validated arguments; a later use with the same fingerprint replays the stored response, a
different fingerprint is a 422. Check-and-record happens in one step when the request reaches
the service, so the order in which an in-flight original and a keyed retry arrive decides which
one acts — never both. A batch records its committed units as they go, so a keyed retry after
a partial batch completes only the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.sim.results import Result


@dataclass
class KeyRecord:
    fingerprint: str
    recorded_at: float
    ttl_s: float
    response: Result | None = None
    units: list[Any] = field(default_factory=list)


class ServiceKeyStore:
    """Keys by scope, forgotten ``ttl_s`` sim seconds after they were recorded."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str, str], KeyRecord] = {}

    def lookup(self, scope: tuple[str, str], key: str, now: float) -> KeyRecord | None:
        record = self._records.get((*scope, key))
        if record is not None and now - record.recorded_at > record.ttl_s:
            del self._records[(*scope, key)]
            return None
        return record

    def record(self, scope: tuple[str, str], key: str, record: KeyRecord) -> None:
        self._records[(*scope, key)] = record
