"""A run's cells (:class:`CellSource`): a grid expanded once and kept when small enough, afresh
on each pass when not; a pass left unfinished keeps nothing."""

from __future__ import annotations

import pytest

from limbo.experiments import source
from limbo.experiments.grid import iter_cells, load_grid
from limbo.experiments.source import CellSource


def test_a_small_grid_is_expanded_once_and_passes_agree_with_a_fresh_expansion() -> None:
    grid = load_grid("default")
    cells = CellSource(grid)
    first = list(cells)
    dropped = dict(cells.dropped)
    second = list(cells)
    assert [c.episode_id for c in first] == [c.episode_id for c in iter_cells(grid)]
    assert all(a is b for a, b in zip(first, second, strict=True))  # the same objects: kept
    assert dict(cells.dropped) == dropped


def test_a_grid_past_keep_is_expanded_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "KEEP", 1)
    cells = CellSource(load_grid("default"))
    first, second = list(cells), list(cells)
    assert cells.kept is None
    assert [c.episode_id for c in first] == [c.episode_id for c in second]
    assert not any(a is b for a, b in zip(first, second, strict=True))


def test_a_pass_left_unfinished_keeps_nothing() -> None:
    cells = CellSource(load_grid("default"))
    next(iter(cells))
    assert cells.kept is None
    assert len(list(cells)) == len(list(iter_cells(load_grid("default"))))
    assert cells.kept is not None
