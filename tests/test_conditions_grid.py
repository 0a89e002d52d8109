"""What the recovery conditions change, measured over a grid of worlds with reference policies.

Grid: every template × each of its focal writes × instances 0–1 × both contracts, in every
fault mode that applies to the focal write. The claims:

* ``sdk-retry`` raises duplicates on committed faults for verify / give-up / wait-verify (its
  retries carry no key), and not for ``keyed`` on writes that honour that policy's key (its
  retries re-send the key);
* the ``guard`` brings duplicates to zero for every policy on read-back-resolves faults on
  every write with a read path, in both contracts, and on every fault under keys-everywhere —
  but not on late commits or redelivery under the native contract;
* with ``verify``, the outcome oracle reaches exactly-once on late commits where the state
  oracle does not, and is never worse anywhere;
* under the heavy-tailed late commit, waiting Δ before the read achieves exactly-once with
  probability P(δ ≤ Δ);
* prompt conditions change nothing for reference policies (they ignore prompt text).

Episodes run in-process in one event loop; outcomes are memoised so tests share baselines.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

from limbo.base.registry import lookup
from limbo.episode.run_one import arun_episode
from limbo.sim.catalog import catalog
from limbo.sim.cell import Cell
from limbo.sim.service import CONTRACTS
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

INSTANCES = (0, 1)
POLICIES = ("blind", "give-up", "verify", "wait-verify", "keyed")
MODES = list(catalog())
RESOLVES = [m for m, i in catalog().items() if i.family == "read-back resolves"]
LATE = [m for m, i in catalog().items() if "late commit" in i.families]
COMMITTED = RESOLVES + LATE
P_DELTA = {0: 0.0, 60: 0.12, 120: 0.29, 300: 0.50, 3600: 0.93}
WAIT_SEEDS = 1500


@dataclass(frozen=True)
class Focal:
    template: str
    service: str
    tool: str
    contract: str
    instance: int


@cache
def focals() -> list[Focal]:
    return [Focal(tid, t.service, tool, contract, instance)
            for contract in CONTRACTS for tid, t in templates().items()
            for tool in t.focal_writes for instance in INSTANCES]


def applies(mode: str, f: Focal) -> bool:
    op = toolset(f.contract)[f.tool].op  # type: ignore[arg-type]
    return bool(lookup("fault", mode).applies(op))


def make(f: Focal, mode: str, condition: str, policy: str, seed: int = 0) -> Cell:
    return Cell(model=f"policy/{policy}", condition=condition, fault=mode, service=f.service,
                template=f.template, focal_write=f.tool, contract=f.contract,
                instance=f.instance, seed=seed)


_OUTCOMES: dict[Cell, dict[str, Any]] = {}


def outcomes(cells: Iterable[Cell]) -> list[dict[str, Any]]:
    """The graded outcome of each cell (run once per test session, in one event loop)."""
    cells = list(cells)
    todo = [c for c in dict.fromkeys(cells) if c not in _OUTCOMES]

    async def run_all() -> None:
        for c in todo:
            out = (await arun_episode(c))["outcome"]
            assert out["termination"] == "finished", (c, out["termination_reason"])
            _OUTCOMES[c] = out

    asyncio.run(run_all())
    return [_OUTCOMES[c] for c in cells]


def grid(modes: Iterable[str], contracts: Iterable[str] = CONTRACTS) -> list[tuple[Focal, str]]:
    return [(f, m) for m in modes for f in focals() if f.contract in contracts and applies(m, f)]


def repeatable(out: dict[str, Any]) -> bool:
    """A repeat of the focal write is a second effect (not natural or conditional)."""
    return out["focal_write_class"]["idempotency"] in ("none", "keyed")


# -- sdk-retry ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["verify", "give-up", "wait-verify"])
def test_sdk_retry_raises_duplicates_on_committed_faults(policy: str) -> None:
    cells = grid(COMMITTED)
    base = outcomes(make(f, m, "vanilla", policy) for f, m in cells)
    retry = outcomes(make(f, m, "sdk-retry", policy) for f, m in cells)
    assert sum(o["duplicate"] for o in retry) > sum(o["duplicate"] for o in base)
    for (f, m), b, r in zip(cells, base, retry, strict=True):
        if repeatable(r):  # the keyless retry is a second effect, whatever the policy does
            assert r["duplicate"], (policy, m, f)
        else:
            assert r["duplicate"] == b["duplicate"], (policy, m, f)


def test_sdk_retry_does_not_raise_duplicates_where_the_keyed_policys_key_is_honoured() -> None:
    cells = grid(COMMITTED)
    base = outcomes(make(f, m, "vanilla", "keyed") for f, m in cells)
    retry = outcomes(make(f, m, "sdk-retry", "keyed") for f, m in cells)
    honoured = raised_elsewhere = 0
    for (f, m), b, r in zip(cells, base, retry, strict=True):
        keyed = f.contract == "keys-everywhere" or r["focal_write_class"]["idempotency"] == "keyed"
        if keyed:
            honoured += 1
            assert not (r["duplicate"] and not b["duplicate"]), (m, f)
            assert not r["duplicate"] or (f.contract == "native" and m == "timeout_late_tail")
        else:
            raised_elsewhere += r["duplicate"] and not b["duplicate"]
    assert honoured > 300 and raised_elsewhere > 0  # where no key is honoured, it does


# -- the guard ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_the_guard_removes_duplicates_where_a_read_back_resolves(policy: str) -> None:
    cells = grid(RESOLVES)
    guarded = outcomes(make(f, m, "guard", policy) for f, m in cells)
    checked = 0
    for (f, m), o in zip(cells, guarded, strict=True):
        if o["focal_write_class"]["read_path"] != "none":
            checked += 1
            assert not o["duplicate"], (policy, m, f)
    assert checked > 300
    if policy == "blind":  # without the guard the same policy duplicates there
        base = outcomes(make(f, m, "vanilla", policy) for f, m in cells)
        assert sum(o["duplicate"] for o in base) > 200


@pytest.mark.parametrize("policy", POLICIES)
def test_the_guard_removes_every_duplicate_under_keys_everywhere(policy: str) -> None:
    cells = grid(MODES, contracts=["keys-everywhere"])
    guarded = outcomes(make(f, m, "guard", policy) for f, m in cells)
    assert [(m, f) for (f, m), o in zip(cells, guarded, strict=True) if o["duplicate"]] == []
    assert {m for _, m in cells} == set(MODES)


@pytest.mark.parametrize("mode", ["timeout_late", "timeout_late_tail", "redelivery"])
def test_the_guard_cannot_remove_late_commits_or_redelivery_natively(mode: str) -> None:
    cells = grid([mode], contracts=["native"])
    for policy in ("blind", "verify"):
        guarded = outcomes(make(f, m, "guard", policy) for f, m in cells)
        assert sum(o["duplicate"] for o in guarded) > 10, (policy, mode)


# -- the oracles --------------------------------------------------------------------------------


def test_the_outcome_oracle_is_exactly_once_on_late_commits_and_never_worse() -> None:
    cells = grid(MODES)
    state = outcomes(make(f, m, "state-oracle", "verify") for f, m in cells)
    final = outcomes(make(f, m, "outcome-oracle", "verify") for f, m in cells)
    late_gain = 0
    for (f, m), s, o in zip(cells, state, final, strict=True):
        assert o["exactly_once"] or not s["exactly_once"], (m, f)  # never worse
        if m in LATE:
            assert o["exactly_once"], (m, f)
            late_gain += not s["exactly_once"]
            assert s["exactly_once"] != repeatable(s), (m, f)  # state oracle: re-issue, dup
    assert late_gain > 100


# -- waiting Δ before the read, under the heavy tail --------------------------------------------


@cache
def strong_focals() -> list[Focal]:
    """Focal writes with a strong read path whose repeat is a second effect (native)."""
    out = []
    for f in focals():
        if f.contract == "native" and f.instance == 0:
            [o] = outcomes([make(f, "none", "vanilla", "verify")])
            wc = o["focal_write_class"]
            if wc["read_path"] == "strong" and repeatable(o):
                out.append(f)
    return out


@pytest.mark.parametrize("delta", sorted(P_DELTA))
def test_waiting_delta_before_the_read_is_exactly_once_with_probability_p_delta(delta: int
                                                                               ) -> None:
    writes = strong_focals()
    assert len(writes) >= 12
    cells = []
    for seed in range(WAIT_SEEDS):
        f = writes[seed % len(writes)]
        f = Focal(f.template, f.service, f.tool, f.contract, (seed // len(writes)) % 2)
        cells.append(make(f, "timeout_late_tail", f"wait-{delta}", "verify", seed=seed))
    eos = sum(o["exactly_once"] for o in outcomes(cells)) / len(cells)
    assert eos == pytest.approx(P_DELTA[delta], abs=0.05)


# -- prompt conditions ----------------------------------------------------------------------------


def _comparable(record: dict[str, Any]) -> str:
    rest = {k: v for k, v in record.items() if k not in ("runtime", "episode_id", "cell")}
    rest["header"] = {k: v for k, v in record["header"].items() if k != "prompts"}
    return json.dumps(rest, sort_keys=True)


@pytest.mark.parametrize("mode", ["timeout_post", "timeout_late_tail", "http500_pre"])
def test_prompt_conditions_change_nothing_for_reference_policies(mode: str) -> None:
    policies = [*POLICIES, "profile"]
    cells = [(Focal(tid, t.service, t.focal_writes[0], "native", 0), p)
             for tid, t in templates().items() for p in policies]

    async def records(condition: str) -> list[dict[str, Any]]:
        return [await arun_episode(make(f, mode, condition, p, seed=3)) for f, p in cells]

    base = asyncio.run(records("vanilla"))
    for condition in ("plain", "aware", "rules"):
        other = asyncio.run(records(condition))
        for b, o in zip(base, other, strict=True):
            assert o["header"]["prompts"] != b["header"]["prompts"]
            assert _comparable(o) == _comparable(b), (condition, o["cell"])
