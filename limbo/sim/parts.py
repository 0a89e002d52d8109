"""What a cell names, resolved once per episode before its world is built.

Each part is shared by every cell that names it — a world file's kit (its services and
templates), a fault mode, a drawn task instance, a contract's toolset — so resolving is
looking up, and a :class:`~limbo.sim.world.World` is built from parts and resolves nothing
itself. The fault mode comes from the caller: the registry is asked by whoever runs the episode
(:mod:`limbo.episode.run_one`), once, with the other names the cell holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from limbo.sim.cell import Cell
from limbo.sim.fault import Fault
from limbo.sim.tasks import TaskInstance, instantiate
from limbo.sim.tools import ToolSpec, toolset
from limbo.sim.worldfile.kit import Kit, kit


@dataclass(frozen=True)
class Parts:
    """The resolved parts of one cell's world."""

    kit: Kit
    fault: type[Fault]
    task: TaskInstance
    tools: dict[str, ToolSpec]


def parts(cell: Cell, fault: type[Fault]) -> Parts:
    """The parts of ``cell``'s world, with ``fault``, its fault mode, as the caller resolved it."""
    found = kit(cell.world)
    task = instantiate(found.template(cell.template), cell.instance)
    return Parts(found, fault, task, toolset(cell.contract, found.services))
