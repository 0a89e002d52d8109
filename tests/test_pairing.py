"""Paired comparisons run in the same world: every arm of a comparison (model, condition,
contract, fault mode) shares the task's world seed, so differences between arms are the arms'
own, never different draws of δ, k or ids."""

from __future__ import annotations

from collections import defaultdict

from limbo.episode.run_one import run_episode
from limbo.experiments.grid import expand, load_grid

WORLD = ("template", "focal_write", "instance")


def test_arms_share_the_world_seed_and_tasks_do_not() -> None:
    cells = expand(load_grid("e2")).cells + expand(load_grid("e2k")).cells
    seeds: dict[tuple, set[int]] = defaultdict(set)
    for cell in cells:
        seeds[tuple(getattr(cell, f) for f in WORLD)].add(cell.seed)
    assert all(len(s) == 1 for s in seeds.values())
    assert len({next(iter(s)) for s in seeds.values()}) == len(seeds)


def _comparable(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in ("runtime", "episode_id", "cell")}
    out["header"] = {k: v for k, v in record["header"].items() if k != "prompts"}
    return out


def test_prompt_arms_are_identical_for_reference_policies_over_e6() -> None:
    """Reference policies ignore prompts: over E6 (every fault, every template, instance 0),
    the vanilla and plain arms of each pair must give the same record."""
    by_pair: dict[tuple, dict[str, dict]] = defaultdict(dict)
    grid = load_grid("e6").model_copy(update={"models": ["policy/wait-verify", "policy/profile"],
                                              "faults": ["timeout_late_tail", "partial_batch",
                                                         "redelivery", "timeout_pre"]})
    for cell in expand(grid).cells:
        key = (cell.model, cell.fault, cell.template, cell.focal_write, cell.instance)
        by_pair[key][cell.condition] = _comparable(run_episode(cell))
    assert len(by_pair) > 100
    for key, arms in by_pair.items():
        assert arms["vanilla"] == arms["plain"], key


def test_the_tail_delay_is_the_same_in_every_arm_of_a_task() -> None:
    grid = load_grid("e5").model_copy(update={"models": ["policy/verify", "policy/keyed"],
                                              "faults": ["timeout_late_tail"]})
    landings: dict[tuple, set[float]] = defaultdict(set)
    for cell in expand(grid).cells[:200]:
        record = run_episode(cell)
        fault = next(e for e in record["events"] if e["type"] == "fault")
        landings[(cell.template, cell.focal_write)].add(
            fault["detail"]["delay_after_timeout_s"])
    assert landings and all(len(d) == 1 for d in landings.values())
