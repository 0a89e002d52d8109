"""What this LIMBO's registries say of the names a record uses, for input that does not say.

A run records its design (:mod:`limbo.experiments.design`): the families of its fault modes
and the kinds of its tools, as they were when it ran. A reader of records takes them from
there, and asks here only for what no design names — a record file outside a run directory, an
Inspect log, a run from before designs were recorded, a mode named on the command line. Both
answers read today's registries (plugins included), which stand below the log
(:mod:`limbo.faults`, :mod:`limbo.sim.tools`).
"""

from __future__ import annotations


def fault_info() -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    """Mode → (family, group, every family) from this LIMBO's fault registry (plugins
    included): for naming families on the command line, and for modes no run's design names."""
    from limbo.faults import catalog

    return {name: (i.family, i.group, i.families) for name, i in catalog().items()}


def tool_kinds() -> dict[str, str]:
    """Tool name → kind, from the registered services (the same under both contracts)."""
    from limbo.sim.tools import toolset

    return {name: spec.kind for name, spec in toolset("native").items()}
