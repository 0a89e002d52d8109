"""Must-show 1 of world files: the built-in social service re-expressed as a world file
(examples/social.toml) gives the same outcome as the Python service on every cell of an
E1-shaped grid — five reference policies x every fault x its four templates x both focal
writes x three instances, native contract — and on the same grid under keys-everywhere.

A cell of the file's world is the built-in cell with its template, service and focal write
renamed (social2_publish for social_publish) and the same seed, so both worlds draw the same
in-flight delays. Task variables are drawn per template id, so texts differ; outcomes may not.
A control world that differs in one fact (weibo's read path) must differ somewhere: the
comparison can see a difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from limbo.episode.run_one import run_episode
from limbo.experiments.grid import Grid, iter_cells
from limbo.sim.cell import Cell
from limbo.sim.worldfile.kit import load_world

ROOT = Path(__file__).resolve().parents[1]
SOCIAL = ROOT / "examples" / "social.toml"
POLICIES = ["policy/blind", "policy/give-up", "policy/verify", "policy/wait-verify",
            "policy/keyed"]


def _e1_shaped(contract: str, instances: int) -> list[Cell]:
    grid = Grid(models=POLICIES, contracts=[contract], faults=["all"], services=["social"],
                instances=instances)
    return list(iter_cells(grid))


def _in_file_world(cell: Cell, identity: str) -> Cell:
    fields = {**cell.public(), "service": "social2", "template": f"file_{cell.template}",
              "focal_write": cell.focal_write.replace("social_", "social2_")}
    return Cell(**fields, timing=cell.timing, limits=cell.limits, world=identity)


def _compare(cells: list[Cell], identity: str) -> tuple[int, list[tuple[Cell, dict]]]:
    differ = []
    for cell in cells:
        python, file = run_episode(cell), run_episode(_in_file_world(cell, identity))
        assert file["outcome"]["termination"] == "finished", file["outcome"]
        changed = {k: (v, file["outcome"][k]) for k, v in python["outcome"].items()
                   if file["outcome"][k] != v}
        if _shape(python) != _shape(file):  # the effects, their attempts and classes
            changed["ledger"] = (_shape(python), _shape(file))
        if changed:
            differ.append((cell, changed))
    return len(cells), differ


def _shape(record: dict) -> list[tuple]:
    return [(e["attempt"], e["reverses"] is not None, e["key"] is not None,
             tuple(sorted(e["write_class"].items()))) for e in record["ledger"]]


@pytest.mark.parametrize(("contract", "instances", "expected"),
                         [("native", 3, 1440), ("keys-everywhere", 1, 480)])
def test_the_file_social_gives_the_python_social_outcome_on_every_cell(
        contract: str, instances: int, expected: int) -> None:
    identity = load_world(SOCIAL).identity
    assert identity is not None
    cells = _e1_shaped(contract, instances)
    faults = {c.fault for c in cells}
    assert len(faults) == 12 and "partial_batch" not in faults  # social has no batch write
    assert {c.template for c in cells} == {"announce_mastodon", "announce_weibo",
                                           "announce_linkedin", "announce_x"}
    count, differ = _compare(cells, identity)
    assert count == expected
    assert differ == []


def test_a_world_that_differs_in_one_fact_gives_other_outcomes(tmp_path: Path) -> None:
    """The control: weibo's listing made strong. Verify now finds the post at once where the
    real service hides it for three minutes, so it re-issues less: outcomes must differ."""
    text = SOCIAL.read_text(encoding="utf-8").replace("weibo = 180", "weibo = 0")
    control = tmp_path / "control.toml"
    control.write_text(text, encoding="utf-8")
    identity = load_world(control).identity
    assert identity is not None and identity != load_world(SOCIAL).identity
    cells = [c for c in _e1_shaped("native", 1)
             if c.template == "announce_weibo" and c.model == "policy/verify"]
    _, differ = _compare(cells, identity)
    assert differ, "the comparison did not see a changed read path"
    assert any(cell.focal_write == "social_publish" and "duplicate" in changed
               for cell, changed in differ)
