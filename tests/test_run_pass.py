"""How a pass picks the cells it runs: those not yet recorded, each once, in the grid's order."""

from __future__ import annotations

from limbo.experiments.grid import expand, load_grid
from limbo.run.plan import plan
from limbo.run.tally import wanted


def test_a_pass_picks_the_cells_not_yet_recorded_each_once_in_order() -> None:
    """A cell handed out twice (a grid that includes another) runs once; the pass digests each
    cell's own id, so a grid that changed since the plan was made cannot shift what it picks."""
    cells = expand(load_grid("default")).cells[:60]
    order = plan(cells, None).mine
    pick = set(order[::3]) | {order[1]}
    chosen = list(wanted(cells + cells[:5], set(pick), lambda: False))
    assert [c.episode_id for c in chosen] == [i for i in order if i in pick]
    halted = iter([False] * 4 + [True] * 100)
    assert len(list(wanted(cells, set(pick), lambda: next(halted)))) < len(chosen)
