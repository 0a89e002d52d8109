"""Cells for the tests."""

from __future__ import annotations

from limbo.sim.cell import Cell
from limbo.sim.tasks import templates


def cell_for(template: str, focal: str | None = None, **kw: object) -> Cell:
    """A cell for ``template`` with its first focal write unless ``focal`` is given."""
    t = templates()[template]
    return Cell(service=t.service, template=template, focal_write=focal or t.focal_writes[0], **kw)
