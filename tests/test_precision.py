"""``limbo run --precision``: a confidence sequence per arm over worlds, each arm stopped as
soon as it is narrow enough — valid under looking after every world, and cheaper than the grid.

Must-show 2 of issue 39: on ``policy/noisy`` over a grid whose arms differ in rate
(examples/precision.toml), ``--precision dup:0.05`` reaches ±5 points on every arm with at least
30% fewer episodes than the full grid, and its estimates fall inside the full grid's intervals.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.hostile import cli, refused, untouched
from support.precision_odds import EPISODES, WORLDS, against_full, odds, precision_facts
from support.sequential_sim import coverage, fixed_n, same_as_shipped, sequence, worlds

from limbo.base.confseq import BettingCS
from limbo.run.precision import parse_spec, world_order

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "examples" / "precision.toml"
sys.path.insert(0, str(ROOT / "tools"))
from same_records import stripped  # noqa: E402


@pytest.mark.parametrize(("text", "needle"), [
    ("dup", "the half-width after ':' must be a number"),
    ("dup:", "the half-width after ':' must be a number"),
    ("dup:five", "the half-width after ':' must be a number"),
    ("dup:0", "between 0.001 and 0.5"),
    ("dup:nan", "between 0.001 and 0.5"),
    ("dup:inf", "between 0.001 and 0.5"),
    ("dup:5", "between 0.001 and 0.5"),
    ("dups:0.05", "the metric must be one of dup, eos, ts, overclaim"),
    ("dup:0.05@template", "'template' cannot define arms"),
    ("dup:0.05@model,instance", "'instance' cannot define arms"),
])
def test_a_bad_precision_is_one_line_and_nothing_is_written(capsys, tmp_path: Path, text: str,
                                                           needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--template", "charge_invoice", "--precision", text, "--out",
                str(out)), needle)
    untouched(out)


def test_precision_refuses_a_shard(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--precision", "dup:0.05", "--shard", "1/2", "--out", str(out)),
            "drop --shard")
    untouched(out)


def test_the_spec_reads_its_parts() -> None:
    spec = parse_spec("eos:0.03@model,condition,model")
    assert (spec.metric, spec.outcome, spec.halfwidth, spec.factors) == (
        "eos", "exactly_once", 0.03, ("model", "condition"))
    assert spec.text() == "eos:0.03@model,condition"


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf])
def test_the_sequence_takes_only_observations_in_the_unit_interval(bad: float) -> None:
    cs = BettingCS()
    with pytest.raises(ValueError, match="observations must lie in"):
        cs.update(bad)
    assert (cs.n, cs.lo, cs.hi) == (0, 0.0, 1.0)


def test_the_sequence_only_narrows_and_holds_its_mean() -> None:
    rng = np.random.default_rng(7)
    cs, spans = BettingCS(target=0.05), []
    for value in rng.binomial(10, 0.3, 300) / 10:
        cs.update(float(value))
        spans.append((cs.lo, cs.hi))
        assert cs.lo <= cs.mean <= cs.hi
    assert all(a[0] <= b[0] and b[1] <= a[1] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] - spans[-1][0] < 0.12


def test_the_simulation_computes_the_shipped_sequence() -> None:
    """The benchmark's vectorised sequence is the shipped one, interval end for interval end."""
    x = worlds(np.random.default_rng(3), 4, 120, 0.2, 0.3, 10)
    assert same_as_shipped(x, 0.05) == 0.0
    assert same_as_shipped(x, None) == 0.0


def test_peeking_breaks_a_fixed_n_interval_and_not_the_sequence() -> None:
    """Must-show 1 in small (benchmarks/bench_sequential.py prints the whole table): 300
    replicates of 150 worlds at 30% and ICC 0.3, looked at after every world."""
    x = worlds(np.random.default_rng(39), 300, 150, 0.3, 0.3, 10)
    cs = coverage(*sequence(x, target=0.05), 0.3, 0.05)
    fixed = coverage(*fixed_n(x), 0.3, 0.05, start=10)
    assert cs.every_world >= 0.95
    assert fixed.every_world < 0.75


@pytest.fixture(scope="module")
def full_and_precise(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from limbo.cli import main

    root = tmp_path_factory.mktemp("precision")
    assert main(["run", str(GRID), "--out", str(root / "full"), "--quiet"]) == 0
    assert main(["run", str(GRID), "--precision", "dup:0.05", "--out", str(root / "precise"),
                 "--quiet"]) == 0
    return root / "full", root / "precise"


def test_precision_reaches_the_target_on_every_arm_with_fewer_episodes(full_and_precise) -> None:
    """The must-show on the example as it ships (grid seed 0): every arm at ±5 points, at least
    30% fewer episodes, each estimate inside the full grid's interval (clustered by world, as
    the tables print it)."""
    full, precise = full_and_precise
    facts = precision_facts(precise)
    grid = len(stripped(full))
    assert grid == facts["grid_episodes"] == EPISODES
    ran = len(stripped(precise))
    assert ran == facts["episodes_run"] <= 0.7 * grid, (ran, grid)
    for arm in facts["arms"]:
        assert arm["status"] == "reached"
        assert arm["hi"] - arm["lo"] <= 0.1 + 1e-9
    arms = against_full(full, precise)
    print(f"\nprecision dup:0.05: {ran} episodes; full grid: {grid} "
          f"({100 * (1 - ran / grid):.0f}% fewer); " + "; ".join(
              f"{a.model}: {100 * a.estimate:.1f} in [{100 * a.lo:.1f}, {100 * a.hi:.1f}]"
              for a in arms))
    assert len(arms) == 2 and all(a.inside for a in arms)


def test_precision_records_are_the_full_grids_records(full_and_precise) -> None:
    full, precise = full_and_precise
    assert set(stripped(precise)) <= set(stripped(full))


def test_the_precise_estimate_is_the_mean_of_the_full_grids_first_worlds(full_and_precise) -> None:
    """The precision run's sample is the full grid's own: the first n worlds of the seeded
    order, whose world rates in the full grid's records give the arm's estimate and sequence."""
    full, precise = full_and_precise
    rates: dict[str, dict[tuple[str, int], list[float]]] = {}
    for line in (full / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        cell = record["cell"]
        rates.setdefault(cell["model"], {}).setdefault((cell["template"], cell["instance"]),
                                                       []).append(record["outcome"]["duplicate"])
    for arm in precision_facts(precise)["arms"]:
        worlds = rates[arm["arm"]["model"]]
        cs = BettingCS(target=0.05)
        for world in world_order(0, worlds)[:arm["worlds"]]:
            cs.update(sum(worlds[world]) / len(worlds[world]))
        assert (round(cs.mean, 6), round(cs.lo, 6), round(cs.hi, 6)) == (
            arm["estimate"], arm["lo"], arm["hi"])


def test_an_estimate_lands_inside_the_full_interval_as_often_as_its_worlds_allow() -> None:
    """Must-show 2's odds in small (benchmarks/bench_precision.py prints them at 4,000
    replicates): 300 simulated replicates of the example. An arm that stops after n of the W
    worlds estimates the mean of n of the full grid's W world rates, so it lands inside the full
    grid's interval about as often as the mean of that many worlds chosen apart from their
    outcomes, and as P(|Z| ≤ 1.96 / √(W/n − 1)) says. The example's arms are equally variable
    and each stops after about 0.6 W (inside w.p. 0.98); had one arm been much less variable
    (rates 0.1 and 0.3 over 350 worlds), it would stop after 0.4 W and land inside under 95% of
    the time."""
    found = odds(np.random.default_rng(39), 300)
    for arm in found.arms:
        assert 120 <= arm.worlds <= 165 and arm.inside >= 0.93
        assert abs(arm.inside - arm.inside_fixed) <= 0.05
        assert abs(arm.inside_fixed - arm.formula) <= 0.05
        assert arm.held >= 0.95 and arm.full_held >= 0.9
    assert found.inside >= 0.9 and found.saving >= 0.35 and found.short <= 0.05
    low, high = odds(np.random.default_rng(39), 300, rates=(0.1, 0.3), worlds=350).arms
    assert 120 <= low.worlds <= 160 and high.worlds > 230
    assert low.inside < 0.95 and abs(low.inside - low.formula) <= 0.05


SEEDS = range(10)


def test_over_ten_grid_seeds_precision_saves_and_lands_inside_the_full_grids_intervals(
        tmp_path: Path) -> None:
    """The example under ten grid seeds (ten world orders and policy draws). Every seed: each
    arm reaches ±5 points, with at least 30% fewer episodes than the full grid. The estimate of
    an arm that stopped after n of W worlds is the mean of a random n of the full grid's
    worlds, inside the full grid's interval with probability about
    P(|Z| ≤ 1.96 / √(W/n − 1)): n ≈ 0.6 W on each arm puts both arms inside at about 0.93 per
    seed (benchmarks/bench_precision.py; docs/runs.md). Asserted: at least 8 of the 10 seeds
    (fewer has probability 2% at 0.93); and the stated rate inside at least 18 of the 20
    sequences (each holds it w.p. ≥ 95%)."""
    from limbo.cli import main

    inside, held = 0, 0
    for seed in SEEDS:
        full, precise = tmp_path / f"full{seed}", tmp_path / f"precise{seed}"
        base = ["run", str(GRID), "--seed", str(seed), "--quiet"]
        assert main([*base, "--out", str(full)]) == 0
        assert main([*base, "--precision", "dup:0.05", "--out", str(precise)]) == 0
        facts = precision_facts(precise)
        assert all(a["status"] == "reached" for a in facts["arms"]), facts["arms"]
        assert facts["episodes_run"] <= 0.7 * facts["grid_episodes"] == 0.7 * EPISODES
        arms = against_full(full, precise)
        inside += all(a.inside for a in arms)
        held += sum(a.held for a in arms)
        print(f"\nseed {seed}: {facts['episodes_run']} of {EPISODES} episodes; " + "; ".join(
            f"{a.model.split('?')[1]} {100 * a.estimate:.1f} in [{100 * a.lo:.1f}, "
            f"{100 * a.hi:.1f}]: {a.inside}" for a in arms))
    print(f"estimates inside the full grid's intervals: {inside} of {len(SEEDS)} seeds; stated "
          f"rate inside the sequence: {held} of {2 * len(SEEDS)} arms")
    assert inside >= 8 and held >= 18


def test_resuming_continues_the_same_sequence(capsys, tmp_path: Path, full_and_precise) -> None:
    """Stopped by --limit, resumed, or run with several episodes at once: each arm stops at
    the same world with the same estimate and sequence."""
    _, precise = full_and_precise
    out = tmp_path / "resumed"
    base = ["run", str(GRID), "--precision", "dup:0.05", "--out", str(out), "--quiet"]
    first = cli(capsys, *base, "--limit", "150")
    assert first.code == 0 and "stopped by --limit 150, the same command resumes" in first.out
    assert precision_facts(out)["stopped"] == "--limit 150"
    again = cli(capsys, *base, "--concurrency", "3")
    assert again.code == 0
    keep = ("arm", "status", "worlds", "observations", "estimate", "lo", "hi")
    assert [{k: a[k] for k in keep} for a in precision_facts(out)["arms"]] == [
        {k: a[k] for k in keep} for a in precision_facts(precise)["arms"]]
    assert set(stripped(precise)) <= set(stripped(out))


def test_every_table_and_the_status_say_the_run_stopped_early(capsys, full_and_precise) -> None:
    _, precise = full_and_precise
    facts = precision_facts(precise)
    tables = cli(capsys, "tables", str(precise), "--table", "3", "--table", "15",
                 "--table", "16")
    assert tables.code == 0
    provenance = [line for line in tables.out.splitlines() if line.startswith("- Computed from:")
                  and "no run holds" not in line]  # Table 3 reads no run of e1: it says so
    assert len(provenance) == 2
    for line in provenance:
        assert facts["note"] in line and "stopped by a 95% betting confidence sequence" in line
    worlds = sorted(a["worlds"] for a in facts["arms"])
    assert f"at {worlds[0]}–{worlds[1]} worlds per arm" in facts["note"]
    for arm in facts["arms"]:
        assert (f"{100 * arm['estimate']:.1f} [{100 * arm['lo']:.1f}, {100 * arm['hi']:.1f}] "
                f"| {arm['worlds']} of {WORLDS} |") in tables.out
    status = cli(capsys, "status", str(precise))
    assert status.code == 0
    assert f"{EPISODES - facts['episodes_run']:,} cells not needed" in status.out
    assert "verdict: OK — every cell the --precision rule needed is recorded" in status.out


def test_the_runs_page_shows_what_the_example_prints(capsys, tmp_path: Path) -> None:
    """docs/runs.md's example: its command, run as written (from the checkout), prints the
    lines the page shows."""
    import re
    import shlex

    page = (ROOT / "docs" / "runs.md").read_text()
    block = next(b for b in re.findall(r"```text\n(.*?)```", page, re.S)
                 if b.startswith("limbo run examples/precision.toml"))
    command, *shown = block.strip().splitlines()
    argv = shlex.split(command)[1:]
    argv[argv.index("runs/precise")] = str(tmp_path / "precise")
    argv[1] = str(ROOT / argv[1])
    done = cli(capsys, *argv)
    assert done.code == 0, done.err
    assert [line for line in done.out.splitlines() if line in shown] == shown


def test_forked_workers_stop_each_arm_where_one_process_does(capsys, tmp_path: Path) -> None:
    """Rounds on ``--workers 2`` (one pool of workers for every round, each round's cells
    chunked across both): the same stops, estimates and sequences as in one process."""
    base = ["run", str(GRID), "--instances", "120", "--precision", "dup:0.12", "--quiet"]
    keep = ("arm", "status", "worlds", "observations", "estimate", "lo", "hi")
    found = []
    for extra in ([], ["--workers", "2", "--concurrency", "2"]):
        out = tmp_path / f"w{len(extra)}"
        assert cli(capsys, *base, *extra, "--out", str(out)).code == 0
        found.append([{k: a[k] for k in keep} for a in precision_facts(out)["arms"]])
    assert found[0] == found[1] and all(a["status"] == "reached" for a in found[0])


def _counting_pools(monkeypatch: pytest.MonkeyPatch, after_run: Any = None) -> list[Any]:
    """The pools of forked workers made from now on, each with the runs it served."""
    from limbo.run import forked

    made: list[Any] = []

    class Counted(forked.Pool):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.runs = 0
            made.append(self)

        def run(self, *args: Any) -> None:
            super().run(*args)
            self.runs += 1
            if after_run is not None:
                after_run(self)

    monkeypatch.setattr(forked, "Pool", Counted)
    return made


def test_a_forked_pass_forks_its_workers_once_for_all_its_rounds(
        capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pools = _counting_pools(monkeypatch)
    assert cli(capsys, "run", str(GRID), "--instances", "60", "--precision", "dup:0.12",
               "--workers", "2", "--quiet", "--out", str(tmp_path / "w2")).code == 0
    assert len(pools) == 1 and pools[0].runs > 3
    assert not any(proc.is_alive() for proc in pools[0].procs.values())  # stopped at the end


def test_a_worker_gone_between_rounds_is_replaced_and_nothing_changes(
        capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    def kill_one_after_the_second_round(pool: Any) -> None:
        if pool.runs == 2 and pool is pools[0]:
            proc = next(iter(pool.procs.values()))
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(10)

    base = ["run", str(GRID), "--instances", "60", "--precision", "dup:0.12", "--quiet"]
    assert cli(capsys, *base, "--out", str(tmp_path / "one")).code == 0
    pools = _counting_pools(monkeypatch, kill_one_after_the_second_round)
    assert cli(capsys, *base, "--workers", "2", "--out", str(tmp_path / "two")).code == 0
    assert len(pools) == 2 and pools[0].runs == 2
    assert stripped(tmp_path / "one") == stripped(tmp_path / "two")
