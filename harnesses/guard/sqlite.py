"""A durable key store on SQLite (standard library only).

It survives a process restart and is safe to share between processes on one host: every
claim runs in a ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock before
reading, so the check ("is there a record?") and the insert are one atomic step — of two
processes claiming the same new key, exactly one inserts and executes; the other sees the
record. A finished write's value is committed before the guard returns, so a process killed
right after a write has its key on disk and a new process replays it instead of writing again.

A process killed *during* a write leaves its claim ``pending``. Whether that write acted is
unknown, so by default the claim stays ``busy`` (nobody re-executes it) until ``lease_s`` has
passed on the guard's clock, after which a retry takes it over as an ambiguous attempt, or an
operator calls :meth:`release` / :meth:`mark_ambiguous`.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from limbo.harnesses.guard.stores import Claim, expired

_SCHEMA = """
CREATE TABLE IF NOT EXISTS guard_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'ambiguous')),
    value TEXT,
    stored INTEGER NOT NULL DEFAULT 1,
    recorded_at REAL,
    claimed_at REAL,
    PRIMARY KEY (scope, key)
)
"""


def _encode(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


class SQLiteKeyStore:
    """Keys in the SQLite database at ``path`` (created if missing). Values must be JSON
    serialisable to be replayed; one that is not is recorded as done without a value, so the
    write is still never repeated. ``ttl_s`` and ``lease_s`` as in
    :class:`~limbo.harnesses.guard.stores.MemoryKeyStore`."""

    def __init__(self, path: str | Path, ttl_s: float | None = None,
                 lease_s: float | None = None, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        self.ttl_s = ttl_s
        self.lease_s = lease_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self, fn: Any) -> Any:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return out

    def claim(self, scope: str, key: str, tool: str, fingerprint: str, now: float | None) -> Claim:
        def run(db: sqlite3.Connection) -> Claim:
            if self.ttl_s is not None and now is not None:
                db.execute("DELETE FROM guard_keys WHERE scope=? AND key=? AND recorded_at < ?",
                           (scope, key, now - self.ttl_s))
            cur = db.execute(
                "INSERT INTO guard_keys (scope, key, tool, fingerprint, state, recorded_at,"
                " claimed_at) VALUES (?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT DO NOTHING",
                (scope, key, tool, fingerprint, now, now))
            if cur.rowcount == 1:
                return Claim("new")
            row = db.execute("SELECT tool, fingerprint, state, value, stored, claimed_at FROM "
                             "guard_keys WHERE scope=? AND key=?", (scope, key)).fetchone()
            r_tool, r_fp, state, value, stored, claimed_at = row
            if (r_tool, r_fp) != (tool, fingerprint):
                return Claim("conflict")
            if state == "done":
                return Claim("replay", json.loads(value) if stored else None, bool(stored))
            if state == "ambiguous" or expired(claimed_at, self.lease_s, now):
                db.execute("UPDATE guard_keys SET state='pending', claimed_at=? WHERE scope=? "
                           "AND key=?", (now, scope, key))
                return Claim("retry")
            return Claim("busy")

        return self._tx(run)  # type: ignore[no-any-return]

    def complete(self, scope: str, key: str, value: Any) -> None:
        try:
            text, stored = json.dumps(value, allow_nan=False, default=_encode), 1
        except (TypeError, ValueError):
            text, stored = None, 0
        self._tx(lambda db: db.execute(
            "UPDATE guard_keys SET state='done', value=?, stored=? WHERE scope=? AND key=?",
            (text, stored, scope, key)))

    def mark_ambiguous(self, scope: str, key: str) -> None:
        self._tx(lambda db: db.execute(
            "UPDATE guard_keys SET state='ambiguous' WHERE scope=? AND key=?", (scope, key)))

    def release(self, scope: str, key: str) -> None:
        self._tx(lambda db: db.execute("DELETE FROM guard_keys WHERE scope=? AND key=?",
                                       (scope, key)))
