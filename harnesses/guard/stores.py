"""Key stores: where the guard remembers which writes a caller has already made.

A store keeps one record per (scope, key) — the scope is the caller, so one caller's key never
reaches another caller's record. :meth:`KeyStore.claim` is the only way in and is atomic:
exactly one of any number of concurrent claims of a new key gets ``new`` and executes; the
others see the record and get its verdict. A record moves through

``pending`` (claimed, executing) → ``done`` (value stored; replays serve it)
``pending`` → ``ambiguous`` (may have acted; a retry re-claims it and must be deduplicated)
``pending`` → released (failed before acting; the key is free again)

Two stores ship: :class:`MemoryKeyStore` (per process, the default) and
:class:`limbo.harnesses.guard.sqlite.SQLiteKeyStore` (durable, shared across processes).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Verdict = Literal["new", "retry", "replay", "conflict", "busy"]


@dataclass(frozen=True)
class Claim:
    """The store's answer to a claim.

    * ``new``: no record; now claimed (``pending``) by this call, which must execute.
    * ``retry``: an earlier attempt failed ambiguously (or its claim lapsed); re-claimed by
      this call, which must not blindly execute again (deduplicate or verify first).
    * ``replay``: done before; ``value`` is the stored result (``stored`` False if it could
      not be kept).
    * ``conflict``: the key is bound to another tool or other arguments.
    * ``busy``: another holder is executing it right now.
    """

    verdict: Verdict
    value: Any = None
    stored: bool = True


@dataclass
class Record:
    tool: str
    fingerprint: str
    state: Literal["pending", "done", "ambiguous"]
    recorded_at: float | None
    claimed_at: float | None
    value: Any = None
    stored: bool = True


class KeyStore(Protocol):
    """What the guard needs from a store. ``now`` is the guard's clock (``None``: no clock, so
    nothing expires)."""

    def claim(self, scope: str, key: str, tool: str, fingerprint: str, now: float | None) -> Claim: ...

    def complete(self, scope: str, key: str, value: Any) -> None: ...

    def mark_ambiguous(self, scope: str, key: str) -> None: ...

    def release(self, scope: str, key: str) -> None: ...


def expired(at: float | None, span: float | None, now: float | None) -> bool:
    """Whether something stamped ``at`` is older than ``span`` at ``now``."""
    return span is not None and now is not None and at is not None and now - at > span


class MemoryKeyStore:
    """An in-process store (thread-safe). Lost when the process ends.

    ``ttl_s``: how long a key is remembered after its first claim (``None``: for ever).
    ``lease_s``: how long a ``pending`` claim may go unfinished before another call may take
    it over as ``retry`` (``None``: never — an interrupted claim stays ``busy`` until
    :meth:`release` or :meth:`mark_ambiguous` is called by an operator).
    """

    def __init__(self, ttl_s: float | None = None, lease_s: float | None = None) -> None:
        self.ttl_s = ttl_s
        self.lease_s = lease_s
        self._records: dict[tuple[str, str], Record] = {}
        self._lock = threading.Lock()

    def claim(self, scope: str, key: str, tool: str, fingerprint: str, now: float | None) -> Claim:
        with self._lock:
            rec = self._records.get((scope, key))
            if rec is not None and expired(rec.recorded_at, self.ttl_s, now):
                rec = None
            if rec is None:
                self._records[(scope, key)] = Record(tool, fingerprint, "pending", now, now)
                return Claim("new")
            if (rec.tool, rec.fingerprint) != (tool, fingerprint):
                return Claim("conflict")
            if rec.state == "done":
                return Claim("replay", copy.deepcopy(rec.value), rec.stored)
            if rec.state == "ambiguous" or expired(rec.claimed_at, self.lease_s, now):
                rec.state, rec.claimed_at = "pending", now
                return Claim("retry")
            return Claim("busy")

    def complete(self, scope: str, key: str, value: Any) -> None:
        with self._lock:
            rec = self._records.get((scope, key))
            if rec is not None:
                rec.state, rec.value = "done", copy.deepcopy(value)

    def mark_ambiguous(self, scope: str, key: str) -> None:
        with self._lock:
            rec = self._records.get((scope, key))
            if rec is not None:
                rec.state = "ambiguous"

    def release(self, scope: str, key: str) -> None:
        with self._lock:
            self._records.pop((scope, key), None)
