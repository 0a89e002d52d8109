"""The fault plan of a proxied episode: which mode, on which write, on the wall clock.

The mode is any registered fault mode — the sandbox's twelve (docs/faults.md) or a plugin's —
and what it does is its act, the one the sandbox runs (:mod:`limbo.sim.act`, run here by
:mod:`limbo.proxy.inject`); durations are the sandbox's times the ``--time-scale``.

Which write carries the fault is the first call to the focal tool, as in the sandbox. The
focal tool is ``MODE@TOOL``'s, else drawn from the seed among the task's focal writes the mode
can act on; the act's own draws (δ, the partial batch's k) and a phantom's id come from the seed
too (:func:`limbo.base.rng.generator`, one component each), so a seed names one fault plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.registry import entries
from limbo.base.rng import Rng, generator
from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.sim.fault import Fault


@dataclass(frozen=True)
class FaultPlan:
    mode: str
    focal: str
    """The declared tool whose first call carries the fault."""
    fault: type[Fault]
    scale: float
    seed: int

    @property
    def client_timeout_s(self) -> float:
        """When a timed-out call is answered, in wall seconds after it arrived."""
        from limbo.sim.config import Timing

        return Timing().client_timeout_s * self.scale

    def phantom_id(self) -> str:
        return f"{self.rng('phantom').getrandbits(48):012x}"

    def rng(self, component: str) -> Rng:
        return generator(self.seed, f"proxy:{component}")


def modes() -> dict[str, Any]:
    """Every mode the proxy applies: each registered mode written as an act."""
    return {name: cls for name, cls in entries("fault").items() if cls.inject is Fault.inject}


def parse(text: str, catalog: Catalog, focal_writes: list[str], seed: int,
          scale: float) -> FaultPlan:
    """``MODE[@TOOL]`` as a plan; a :class:`UsageError` naming what to fix."""
    mode, _, named = text.partition("@")
    found = modes()
    if mode not in found:
        simpy_only = " (it overrides inject: write it as an act, docs/faults.md)" \
            if mode in entries("fault") else ""
        raise UsageError(f"--fault {mode!r} is not a mode the proxy applies{simpy_only}; choose "
                         f"from: {', '.join(found)}")
    if named:
        tool = _tool(named, catalog)
        problem = why_not(found[mode], tool)
        if problem:
            raise UsageError(f"--fault {text}: {problem}")
        focal = tool.name
    else:
        fits = [t for t in focal_writes if not why_not(found[mode], catalog.tools[t])]
        if not fits:
            raise UsageError(f"--fault {mode}: no write of the task can carry it "
                             f"({', '.join(focal_writes) or 'the task has no write'}); name one "
                             f"with {mode}@TOOL")
        focal = fits[generator(seed, "proxy:focal").randrange(len(fits))]
    return FaultPlan(mode, focal, found[mode], scale, seed)


def _tool(name: str, catalog: Catalog) -> DeclaredTool:
    tool = catalog.tools.get(name) or catalog.of(name)
    if tool is None:
        raise UsageError(f"--fault ...@{name}: {name!r} is not a tool the world file declares "
                         f"({', '.join(t.name for t in catalog.writes())})")
    return tool


def why_not(mode: type[Fault], tool: DeclaredTool) -> str | None:
    """Why ``mode`` cannot act on ``tool`` (``None``: it can)."""
    if tool.write is None:
        return f"{tool.name} is a read; faults act on writes"
    if not mode.applies(tool.op):
        return (f"{mode.name} acts on batch writes only, and {tool.name} is none"
                if mode.batch_only else f"{mode.name} cannot act on {tool.name}")
    if mode.acknowledges and tool.write.result is None:
        return (f"{mode.name} needs the shape of {tool.name}'s success: give it "
                f"result = {{...}} in the world file")
    return None
