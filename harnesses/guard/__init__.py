"""The action guard: a tool-layer library that makes an agent's writes safe to retry.

Wrap any set of tool functions (sync or async), declared with their argument schema, and call
them through the guard as a named caller. It checks, in order: the tool is allowed and its
arguments valid; the caller is authorised (before any idempotency lookup); the write gets a
key scoped to the caller; a reused key must match its tool and arguments; identical calls in
flight share one execution; a repeat after an ambiguous failure is deduplicated or read back
before it is re-issued; and every write returns a receipt while every decision is logged.

Nothing here depends on the rest of LIMBO (``sandbox`` is the LIMBO adapter and is not
imported by this package). Keys live in a pluggable store: :class:`MemoryKeyStore` (default)
or :class:`SQLiteKeyStore` (durable across restarts and processes).
"""

from limbo.harnesses.guard.allowlist import Tool
from limbo.harnesses.guard.core import BoundGuard, Guard, default_exception_outcome
from limbo.harnesses.guard.receipts import (
    Decision,
    GuardError,
    GuardResult,
    GuardUsageError,
    Receipt,
    ToolFailure,
    Verification,
)
from limbo.harnesses.guard.sqlite import SQLiteKeyStore
from limbo.harnesses.guard.stores import Claim, KeyStore, MemoryKeyStore

__all__ = [
    "BoundGuard",
    "Claim",
    "Decision",
    "Guard",
    "GuardError",
    "GuardResult",
    "GuardUsageError",
    "KeyStore",
    "MemoryKeyStore",
    "Receipt",
    "SQLiteKeyStore",
    "Tool",
    "ToolFailure",
    "Verification",
    "default_exception_outcome",
]
