"""Shared fixtures. Tests run against the installed package (``import limbo``), never a bare
top-level folder."""

from __future__ import annotations

import pytest

from limbo.cell import Cell
from limbo.tasks import templates


def cell_for(template: str, focal: str | None = None, **kw: object) -> Cell:
    """A cell for ``template`` with its first focal write unless ``focal`` is given."""
    t = templates()[template]
    return Cell(service=t.service, template=template, focal_write=focal or t.focal_writes[0], **kw)


@pytest.fixture
def make_cell():
    return cell_for
