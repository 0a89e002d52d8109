"""What the guard hands back: results, receipts, decisions, and the failures a tool reports.

These are plain frozen dataclasses so that a host (an MCP server, an agent loop, LIMBO's tool
layer) can serialise them with :meth:`as_dict` and nothing in them can be changed after the
guard has logged it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Outcome = Literal["ok", "definite", "ambiguous"]
"""How a call ended: it worked; it failed before it could act (safe to retry with corrected
arguments); or it failed in a way that leaves open whether it acted."""

ErrorKind = Literal[
    "unknown_tool",       # step 1: not on the allowlist
    "invalid_arguments",  # step 1: the schema (or a non-finite number) rejected the arguments
    "forbidden",          # step 2: the authorisation policy refused (or failed)
    "conflict",           # step 4: the key was used with another tool or other arguments
    "in_progress",        # step 5: another process holds the key and has not finished
    "failed",             # the tool ran and failed (``ambiguous`` says how)
]


class ToolFailure(Exception):
    """Raise from a tool to report a failure with its kind.

    ``ambiguous=False`` means the tool is sure it did not act (a 4xx, a 429): the guard releases
    the key so a corrected retry runs. ``ambiguous=True`` means it may have acted (timeout,
    5xx, reset): the guard keeps the key so a retry can be deduplicated or verified.
    """

    def __init__(self, message: str, *, ambiguous: bool, detail: Any = None) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous
        self.detail = detail


class GuardUsageError(Exception):
    """The host misused the guard (e.g. an async tool called through the sync API inside a
    running event loop). Never an agent-visible outcome."""


@dataclass(frozen=True)
class Verification:
    """What a tool's read-back found for an earlier write whose outcome was ambiguous.

    ``visible``: ``True`` the effect is there, ``False`` it is not, ``None`` the read could not
    tell (no read path, the read failed). ``value`` is returned to the caller in place of a
    re-issue when the effect is visible. ``missing`` lists the units (batch rows) not visible.
    """

    visible: bool | None
    value: Any = None
    missing: tuple[int, ...] | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Receipt:
    """What a write did: which tool with which validated arguments, under which key, and
    whether it was served without executing (``replayed``: from the key store or a verified
    read; ``shared``: joined an identical call already in flight)."""

    tool: str
    args: dict[str, Any]
    key: str
    key_source: Literal["caller", "derived"]
    outcome: Outcome
    replayed: bool = False
    shared: bool = False
    verified: bool | None = None
    """``True``: a read-back showed the earlier effect; ``False``: it did not and the write was
    forwarded; ``None``: no read-back happened (or it could not tell)."""
    forwarded_units: tuple[int, ...] | None = None
    """For a batch forwarded after a partial read-back: the units (rows) actually sent."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    """One entry of the decision log: which of the seven steps decided what, for whom."""

    step: int
    action: str
    caller: str
    tool: str
    key: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GuardError:
    kind: ErrorKind
    message: str
    ambiguous: bool | None = None
    """For ``failed``: whether the write may have taken effect."""


@dataclass(frozen=True)
class GuardResult:
    """The answer to one guarded call.

    ``value`` is what the tool returned (also for a failure the tool reported as a value), or
    the stored value of a replay. A refused caller gets ``error.kind == "forbidden"`` and
    nothing else: no value, no receipt.
    """

    ok: bool
    value: Any = None
    error: GuardError | None = None
    receipt: Receipt | None = None
    decisions: tuple[Decision, ...] = ()
