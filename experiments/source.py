"""A grid's cells for a run, which passes over them twice: :class:`CellSource`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from limbo.experiments.grid import Grid, count_cells, iter_cells
from limbo.sim.cell import Cell


class CellSource:
    """The cells of a grid for a run that passes over them twice (its plan, then the run): a
    grid of at most :data:`KEEP` cells is expanded once and its cells kept (the second
    expansion, each cell built and its id digested again, was a third of the parent's CPU in
    the paper grid's ``--workers 2`` run); a larger one afresh on each pass, so that memory does
    not grow with it. :attr:`dropped` counts what the last complete pass dropped."""

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        self.dropped: Counter[str] = Counter()
        self.kept: list[Cell] | None = None

    def __iter__(self) -> Iterator[Cell]:
        if self.kept is not None:
            yield from self.kept
            return
        dropped: Counter[str] = Counter()
        keep: list[Cell] | None = [] if count_cells(self.grid) <= KEEP else None
        for cell in iter_cells(self.grid, dropped):
            if keep is not None:
                keep.append(cell)
            yield cell
        self.dropped, self.kept = dropped, keep


KEEP = 100_000
"""The largest grid a :class:`CellSource` keeps (about 1.7 kB a cell, 65 MB for the paper grid's
39,600)."""
