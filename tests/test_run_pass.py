"""How a pass picks the cells it runs: those not yet recorded, each once, in the grid's order."""

from __future__ import annotations

from limbo.experiments.grid import expand, load_grid
from limbo.run.plan import plan
from limbo.run.tally import wanted
from limbo.sim.cell import Cell


def test_a_pass_given_the_plan_s_ids_picks_the_same_cells_without_digesting_them() -> None:
    """``wanted`` with the ids of every cell in order (a whole grid's plan) hands out exactly
    the cells it hands out digesting each id itself — each once, in order — and digests none."""
    cells = expand(load_grid("default")).cells[:60]
    order = plan(cells, None).mine
    fresh = [Cell(**c.model_dump()) for c in cells]  # ids not yet computed
    pick = set(order[::3]) | {order[1]}
    chosen = list(wanted(fresh + fresh[:5], set(pick), lambda: False, order + order[:5]))
    assert [c.episode_id for c in chosen] == [i for i in order if i in pick]
    assert [c.episode_id for c in wanted(cells, set(pick), lambda: False)] == \
        [c.episode_id for c in chosen]
    untouched = [c for c in fresh if c not in chosen]
    assert untouched and all("episode_id" not in c.__dict__ for c in untouched)
