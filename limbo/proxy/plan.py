"""The fault plan of a proxied episode: which mode, on which write, and what it does there —
the sandbox's twelve modes (docs/faults.md) with their commit-aware meanings, on the wall clock.

A mode is one :class:`Act`: whether the focal write is forwarded (now, never, later, a copy
after it, only its first k units) and what the agent hears (the upstream's answer, or the
sandbox's own failure result from :mod:`limbo.sim.responses`, byte for byte). Durations are
the sandbox's times the ``--time-scale``: the client timeout (30 s), the late commit (90 s
after the timeout), the heavy tail δ, the redelivered copy (2 s after the original lands).

Which write carries the fault is the first call to the focal tool, as in the sandbox. The
focal tool is ``MODE@TOOL``'s, else drawn from the seed among the task's focal writes the mode
can act on; δ, the partial batch's k and a phantom's id are drawn from the seed too
(:func:`limbo.base.rng.generator`, one component per draw), so a seed names one fault plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from limbo.base.errors import UsageError
from limbo.base.rng import Rng, generator
from limbo.faults import tail
from limbo.faults.acks import COPY_AFTER_S
from limbo.faults.timeouts import LATE_AFTER_TIMEOUT_S
from limbo.proxy.declared import Catalog, DeclaredTool

Forward = Literal["now", "never", "later", "copy", "cut"]
Answer = Literal["upstream", "timeout", "server_error", "connection_reset", "rate_limited",
                 "phantom"]


@dataclass(frozen=True)
class Act:
    """What a mode does to the focal write."""

    forward: Forward
    answer: Answer
    stale: bool = False
    """The next read of the write's service is answered without the write's effect."""


ACTS: dict[str, Act] = {
    "none": Act("now", "upstream"),
    "timeout_pre": Act("never", "timeout"),
    "timeout_post": Act("now", "timeout"),
    "timeout_late": Act("later", "timeout"),
    "timeout_late_tail": Act("later", "timeout"),
    "stale_readback": Act("now", "timeout", stale=True),
    "http500_pre": Act("never", "server_error"),
    "http500_post": Act("now", "server_error"),
    "conn_reset_post": Act("now", "connection_reset"),
    "throttle_pre": Act("never", "rate_limited"),
    "partial_batch": Act("cut", "server_error"),
    "redelivery": Act("copy", "upstream"),
    "phantom_success": Act("never", "phantom"),
}
"""Every mode the proxy applies (a plugin's mode is a simpy process of the sandbox: refused)."""


@dataclass(frozen=True)
class FaultPlan:
    mode: str
    focal: str
    """The declared tool whose first call carries the fault."""
    act: Act
    scale: float
    seed: int

    @property
    def client_timeout_s(self) -> float:
        """When a timed-out call is answered, in wall seconds after it arrived."""
        from limbo.sim.config import Timing

        return Timing().client_timeout_s * self.scale

    def late_after_s(self) -> float:
        """How long after the timeout a late write is forwarded (wall seconds)."""
        delay = (tail.draw(self.rng("tail")) if self.mode == "timeout_late_tail"
                 else LATE_AFTER_TIMEOUT_S)
        return delay * self.scale

    @property
    def copy_after_s(self) -> float:
        return COPY_AFTER_S * self.scale

    def cut(self, n: int) -> int:
        """How many of a batch's ``n`` units a partial batch forwards: 1 <= k < n (0 for a
        batch of one, which cannot stop part-way)."""
        return self.rng("partial_batch").randint(1, n - 1) if n >= 2 else 0

    def phantom_id(self) -> str:
        return f"{self.rng('phantom').getrandbits(48):012x}"

    def rng(self, component: str) -> Rng:
        return generator(self.seed, f"proxy:{component}")


def parse(text: str, catalog: Catalog, focal_writes: list[str], seed: int,
          scale: float) -> FaultPlan:
    """``MODE[@TOOL]`` as a plan; a :class:`UsageError` naming what to fix."""
    mode, _, named = text.partition("@")
    if mode not in ACTS:
        raise UsageError(f"--fault {mode!r} is not a mode the proxy applies; choose from: "
                         f"{', '.join(ACTS)}")
    if named:
        tool = _tool(named, catalog)
        problem = why_not(mode, tool)
        if problem:
            raise UsageError(f"--fault {text}: {problem}")
        focal = tool.name
    else:
        fits = [t for t in focal_writes if not why_not(mode, catalog.tools[t])]
        if not fits:
            raise UsageError(f"--fault {mode}: no write of the task can carry it "
                             f"({', '.join(focal_writes) or 'the task has no write'}); name one "
                             f"with {mode}@TOOL")
        focal = fits[generator(seed, "proxy:focal").randrange(len(fits))]
    return FaultPlan(mode, focal, ACTS[mode], scale, seed)


def _tool(name: str, catalog: Catalog) -> DeclaredTool:
    tool = catalog.tools.get(name) or catalog.of(name)
    if tool is None:
        raise UsageError(f"--fault ...@{name}: {name!r} is not a tool the world file declares "
                         f"({', '.join(t.name for t in catalog.writes())})")
    return tool


def why_not(mode: str, tool: DeclaredTool) -> str | None:
    """Why ``mode`` cannot act on ``tool`` (``None``: it can)."""
    if tool.write is None:
        return f"{tool.name} is a read; faults act on writes"
    if mode == "partial_batch" and tool.op.batch is None:
        return f"partial_batch acts on batch writes only, and {tool.name} is none"
    if mode == "phantom_success" and tool.write.result is None:
        return (f"phantom_success needs the shape of {tool.name}'s success: give it "
                f"result = {{...}} in the world file")
    return None
