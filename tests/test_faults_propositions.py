"""The paper's two propositions, as properties of the simulated worlds.

Proposition 1: no amount of waiting makes verification alone safe. For any wait Δ there is a
``timeout_late_tail`` world (a seed whose δ outlasts the wait and the read) in which
``policy/wait-verify?wait=Δ`` duplicates, while in the ``timeout_pre`` world with the same seed —
which the agent cannot tell apart — the same policy does the right thing.

Proposition 2: re-issuing with the original's key never duplicates in the timeout group on a
write whose key outlives the in-flight bound (every write under keys-everywhere). Mastodon's
native one-hour key retention is the exception, and a test shows the duplicate it lets through.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from limbo.base.rng import generator
from limbo.episode.run_one import run_episode
from limbo.faults import tail
from limbo.sim.catalog import group_members
from limbo.sim.cell import Cell
from limbo.sim.config import Timing
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

TIMING = Timing()
MAX_SEEDS = 5000


def delta(seed: int) -> float:
    """δ of the ``timeout_late_tail`` world with ``seed`` (the fault generator's first draw)."""
    return tail.draw(generator(seed, "fault"))


def first_seed(pred: Any, start: int = 0) -> int:
    for seed in range(start, start + MAX_SEEDS):
        if pred(delta(seed)):
            return seed
    raise AssertionError("no seed found")


def run(template: str, focal: str, fault: str, model: str, contract: str = "native",
        instance: int = 0, seed: int = 0) -> dict[str, Any]:
    t = templates()[template]
    return run_episode(Cell(model=model, contract=contract, fault=fault, service=t.service,
                            template=template, focal_write=focal, instance=instance, seed=seed))


@cache
def strong_duplicable() -> list[tuple[str, str]]:
    """Focal writes with a strong read path that a repeat would duplicate (not natural or
    conditional), where the propositions' statements are meaningful."""
    tools = toolset("native")
    out = []
    for tid, t in templates().items():
        for focal in t.focal_writes:
            cls = run(tid, focal, "none", "policy/verify")["outcome"]["focal_write_class"]
            if cls["read_path"] == "strong" and tools[focal].op.idempotency not in (
                    "natural", "conditional"):
                out.append((tid, focal))
    return out


def all_focal() -> list[tuple[str, str]]:
    return [(tid, f) for tid, t in templates().items() for f in t.focal_writes]


def test_there_are_enough_cells_for_the_propositions() -> None:
    assert len(strong_duplicable()) >= 8
    assert ("announce_mastodon", "social_publish") in strong_duplicable()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(wait=st.floats(min_value=0.0, max_value=3600.0, allow_nan=False),
       cell=st.sampled_from(sorted(strong_duplicable())), instance=st.integers(0, 2))
def test_proposition_1_every_wait_is_beaten_by_some_tail_world(
        wait: float, cell: tuple[str, str], instance: int) -> None:
    template, focal = cell
    model = f"policy/wait-verify?wait={wait!r}"
    # The read comes at most two think times and a read after the wait; the lag is 0 here.
    seed = first_seed(lambda d: d > wait + 2 * TIMING.think_s + TIMING.read_s)
    late = run(template, focal, "timeout_late_tail", model, instance=instance, seed=seed)
    pre = run(template, focal, "timeout_pre", model, instance=instance, seed=seed)
    assert late["outcome"]["duplicate"], (wait, seed, delta(seed))
    assert pre["outcome"]["exactly_once"], (wait, seed)
    focal_commits = [e for e in pre["ledger"] if e["tool"] == focal]
    assert focal_commits and {e["attempt"] for e in focal_commits} == {"reissue-1"}


def test_proposition_1_is_not_vacuous() -> None:
    """The same policy is safe in a tail world whose δ falls inside its wait."""
    wait = 600.0
    seed = first_seed(lambda d: d < wait - TIMING.think_s)
    record = run("charge_invoice", "billing_create_charge", "timeout_late_tail",
                 f"policy/wait-verify?wait={wait}", seed=seed)
    assert record["outcome"]["exactly_once"]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cell=st.sampled_from(all_focal()), mode=st.sampled_from(group_members()["timeout"]),
       instance=st.integers(0, 2), seed=st.integers(0, 10_000))
def test_proposition_2_the_same_key_never_duplicates(
        cell: tuple[str, str], mode: str, instance: int, seed: int) -> None:
    template, focal = cell
    record = run(template, focal, mode, "policy/keyed", "keys-everywhere", instance, seed)
    assert not record["outcome"]["duplicate"], (template, focal, mode, seed, delta(seed))
    assert record["outcome"]["exactly_once"], (template, focal, mode, seed)


def test_proposition_2_holds_at_the_far_end_of_the_tail() -> None:
    """Whatever δ: worlds whose original lands more than an hour — up to two — later."""
    seeds = [first_seed(lambda d: d > 3600.0)]
    seeds.append(first_seed(lambda d: d > 6000.0))
    for template, focal in all_focal():
        for seed in seeds:
            record = run(template, focal, "timeout_late_tail", "policy/keyed", "keys-everywhere",
                         seed=seed)
            assert record["outcome"]["exactly_once"], (template, focal, seed)
            arrival = next(e for e in record["events"] if e["type"] == "arrival")
            assert arrival["outcome"] in ("replayed", "no_effect"), (template, focal)


def test_mastodon_keys_expire_after_an_hour_and_then_the_late_original_duplicates() -> None:
    """Native mastodon keeps a key 1 h: an original landing later than that commits again."""
    # The keyed retry is recorded one think time and half a write after the timeout.
    forgotten = first_seed(lambda d: d > 3600.0 + TIMING.think_s + TIMING.write_s)
    kept = first_seed(lambda d: d < 3600.0 - TIMING.think_s)
    cell = ("announce_mastodon", "social_publish", "timeout_late_tail", "policy/keyed")
    late = run(*cell, "native", seed=forgotten)
    assert late["outcome"]["duplicate"]
    posts = [e for e in late["ledger"] if e["tool"] == "social_publish"]
    assert [e["attempt"] for e in posts] == ["reissue-1", "original"]
    assert posts[0]["key"] == posts[1]["key"] is not None  # same key, forgotten in between
    assert not run(*cell, "native", seed=kept)["outcome"]["duplicate"]
    # Under keys-everywhere the key lives 24 h, so the same world is exactly-once.
    assert run(*cell, "keys-everywhere", seed=forgotten)["outcome"]["exactly_once"]
