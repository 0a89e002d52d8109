"""Read-back resolution: which read shows a write's effect, and what a read's result says.

Written once for every reader: the reference policies (which send the read as a tool call of
their own), the verifying scaffolds and the guard's adapter (which send it through the tool
layer), and the endpoint (which needs the read's lag for a write's class). Each write declares
its read in its service (``readback=``); a batch write is checked unit by unit through its
:class:`~limbo.sim.service.Batch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.sim.results import Result
from limbo.sim.service import Args, OpSpec, ReadBack, fits


@dataclass(frozen=True)
class Seen:
    """What one read-back result shows."""

    visible: bool | None
    """Whether the effect (a batch: every unit) is visible; ``None`` when the read failed."""
    missing: list[int] | None = None
    """Batch writes: indexes of the units not visible."""
    items: list[dict[str, Any]] = field(default_factory=list)
    """The items of the read that show the effect."""


@dataclass(frozen=True)
class ReadPlan:
    """The read that shows one write's effect."""

    tool: str
    args: Args
    lag: float | None
    """The read path's documented lag for these arguments; ``None``: no read path."""
    spec: ReadBack
    units: list[Any] | None = None
    """Batch writes: the units to look for, one by one."""

    def check(self, result: Result) -> Seen:
        """What ``result`` (the read's answer) shows of the write."""
        if not result.get("ok"):
            return Seen(None)
        found = [item for item in self.spec.items(result) if fits(item, self.spec.match)]
        if self.units is None:
            return Seen(bool(found), None, found)
        missing = [i for i, unit in enumerate(self.units)
                   if not any(fits(item, unit) for item in found)]
        shown = [item for item in found if any(fits(item, unit) for unit in self.units)]
        return Seen(not missing, missing, shown)


def resolve(op: OpSpec, args: Args) -> ReadPlan | None:
    """The read that shows write ``op`` with validated ``args`` (no key); ``None`` when the
    write declares none."""
    spec = op.readback(args) if op.readback is not None else None
    if spec is None:
        return None
    read_op = op.owner.ops[spec.op]
    assert read_op.lag is not None, f"{read_op.tool} is not a read"
    units = op.batch.items(args) if op.batch is not None else None
    return ReadPlan(read_op.tool, dict(spec.args), read_op.lag(spec.args), spec, units)
