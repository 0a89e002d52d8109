"""The grid runner at scale: killed and resumed, sharded, budgeted, and strict about input."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from limbo.experiments.grid import expand, load_grid
from limbo.sim.cell import Cell

LIMBO = str(Path(sys.executable).parent / "limbo")


def limbo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def records(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted(run_dir.glob("episodes*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)  # a torn line would raise here
            record.pop("runtime")
            out.append(record)
    return sorted(out, key=lambda r: r["episode_id"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("reference")
    result = limbo("run", "--out", str(out), "--quiet", "--workers", "2")
    assert result.returncode == 0, result.stderr
    return records(out)


def test_killed_runs_resume_to_exactly_the_uninterrupted_records(tmp_path: Path,
                                                                 reference: list[dict]) -> None:
    assert len(reference) >= 2000
    rng = random.Random(7)
    for _ in range(3):
        proc = subprocess.Popen([LIMBO, "run", "--out", str(tmp_path), "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(rng.uniform(0.8, 3.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    final = limbo("run", "--out", str(tmp_path), "--quiet")
    assert final.returncode == 0, final.stderr
    got = records(tmp_path)
    ids = [r["episode_id"] for r in got]
    assert len(ids) == len(set(ids)) == len(reference)
    assert got == reference


def test_three_shards_together_equal_the_unsharded_run(tmp_path: Path,
                                                       reference: list[dict]) -> None:
    for i in (1, 2, 3):
        result = limbo("run", "--out", str(tmp_path), "--quiet", "--shard", f"{i}/3")
        assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.glob("episodes*.jsonl")) == [
        f"episodes.shard-{i}-of-3.jsonl" for i in (1, 2, 3)]
    assert records(tmp_path) == reference
    manifests = [json.loads((tmp_path / f"manifest.shard-{i}-of-3.json").read_text())
                 for i in (1, 2, 3)]
    assert [m["shard"] for m in manifests] == [[1, 3], [2, 3], [3, 3]]
    assert sum(m["ran"] for m in manifests) == len(reference)


def test_torn_last_line_is_detected_reported_and_ignored(tmp_path: Path) -> None:
    assert limbo("run", "--out", str(tmp_path), "--quiet", "--template", "charge_invoice",
                 "--limit", "5").returncode == 0
    path = tmp_path / "episodes.jsonl"
    with path.open("a") as fh:
        fh.write('{"schema": "limbo.episode/1", "episode_id": "ep-torn", "cell": {')
    again = limbo("run", "--out", str(tmp_path), "--quiet", "--template", "charge_invoice")
    assert again.returncode == 0, again.stderr
    assert "repaired a torn last line" in again.stdout
    lines = path.read_text().splitlines()
    assert all(json.loads(line)["episode_id"] != "ep-torn" for line in lines)
    assert len({json.loads(line)["episode_id"] for line in lines}) == len(lines)


def test_episode_id_is_the_same_from_grid_and_from_record(tmp_path: Path) -> None:
    assert limbo("run", "e1s", "--out", str(tmp_path), "--quiet", "--limit", "30").returncode == 0
    expected = {c.episode_id for c in expand(load_grid("e1s")).cells}
    for record in records(tmp_path):
        cell = Cell(**record["cell"], timing=record["header"]["timing"],
                    limits=record["header"]["limits"])
        assert cell.episode_id == record["episode_id"] in expected


def test_a_limit_pass_leaves_the_run_stopped_until_the_rest_is_run(tmp_path: Path) -> None:
    """``--limit`` does what it was asked, but the grid is not complete: the manifest and
    ``limbo status`` say so; the pass that runs the rest marks it complete."""
    assert limbo("run", "e1s", "--out", str(tmp_path), "--quiet", "--limit", "30").returncode == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (manifest["status"], manifest["stop_reason"]) == ("stopped", "--limit 30")
    assert "last pass stopped (--limit 30)" in limbo("status", str(tmp_path)).stdout
    assert limbo("run", "e1s", "--out", str(tmp_path), "--quiet").returncode == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (manifest["status"], manifest["stop_reason"]) == ("complete", None)


def test_a_copied_cell_has_the_id_of_what_it_now_is() -> None:
    """The id is cached on the cell; a copy with another seed is another episode."""
    cell = expand(load_grid("e1s")).cells[0]
    assert cell.episode_id  # computed, so cached
    moved = cell.model_copy(update={"seed": cell.seed + 1})
    assert cell.episode_id != moved.episode_id
    assert moved.episode_id == Cell(**moved.model_dump()).episode_id
    assert cell.model_copy().episode_id == cell.episode_id


def test_adding_a_level_never_changes_existing_cells() -> None:
    grid = load_grid("default")
    small = {c.episode_id: c.seed for c in expand(grid.model_copy(update={
        "models": ["policy/verify"]})).cells}
    large = {c.episode_id: c.seed for c in expand(grid.model_copy(update={
        "models": ["policy/verify", "policy/keyed"]})).cells}
    assert small.items() <= large.items()


def test_an_include_grid_runs_each_cell_of_its_grids_once_in_their_order(tmp_path: Path) -> None:
    from limbo.experiments.grid import included, iter_cells

    paper = load_grid("paper")
    first: dict[str, None] = {}
    every = 0
    for sub in included(paper):
        for cell in iter_cells(sub):
            first.setdefault(cell.episode_id)
            every += 1
    assert [c.episode_id for c in iter_cells(paper)] == list(first)
    assert len(first) < every  # its grids share cells: each runs once

    # The same cells at other timings are other cells: both grids' run.
    body = 'models = ["policy/verify"]\nfaults = ["none"]\ntemplates = ["import_batch"]\n'
    (tmp_path / "fast.toml").write_text(body)
    (tmp_path / "slow.toml").write_text(body + "[timing]\nread_s = 2.0\n")
    fast_file, slow_file = tmp_path / "fast.toml", tmp_path / "slow.toml"
    (tmp_path / "both.toml").write_text(f'include = ["{fast_file}", "{slow_file}"]\n')
    fast = [c.episode_id for c in iter_cells(load_grid(str(tmp_path / "fast.toml")))]
    slow = [c.episode_id for c in iter_cells(load_grid(str(tmp_path / "slow.toml")))]
    both = [c.episode_id for c in iter_cells(load_grid(str(tmp_path / "both.toml")))]
    assert fast and len(fast) == len(slow) and not set(fast) & set(slow)
    assert both == fast + slow


def _peak_rss_kb(args: list[str]) -> int:
    proc = subprocess.Popen([LIMBO, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss


def test_memory_stays_flat_from_2000_to_20000_episodes(tmp_path: Path) -> None:
    base = ["run", "default", "--instances", "6", "--quiet"]
    small = _peak_rss_kb([*base, "--out", str(tmp_path / "a"), "--limit", "2000"])
    large = _peak_rss_kb([*base, "--out", str(tmp_path / "b"), "--limit", "20000"])
    assert sum(1 for _ in (tmp_path / "b" / "episodes.jsonl").open()) == 20000
    assert large <= 1.5 * small, (small, large)


COSTLY = '''
import os

from limbo.episode.models import ModelTurn, ToolCall, model_adapter
from limbo.log.records import Usage
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("costly")
class Costly(PolicyAdapter):
    """policy/verify that bills one cent per call, and notes each episode it starts."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)
        with open(os.environ["LIMBO_TEST_STARTS"], "a") as fh:
            fh.write("start\\n")

    @classmethod
    def price_per_mtok(cls, model, params):
        return {"input": 1.0, "cached_input": 0.5, "output": 2.0}

    async def generate(self, messages, tools, ctx):
        turn = await super().generate(messages, tools, ctx)
        return turn.model_copy(update={"usage": Usage(input_tokens=10, cost_usd=0.01)})


@model_adapter("unpriced")
class Unpriced(PolicyAdapter):
    def __init__(self, model, **params):
        super().__init__("verify", **params)

    @classmethod
    def price_per_mtok(cls, model, params):
        return None
'''


def test_max_cost_stops_cleanly_and_the_manifest_says_why(tmp_path: Path, monkeypatch) -> None:
    plugin = tmp_path / "costly.py"
    plugin.write_text(COSTLY)
    starts = tmp_path / "starts"
    monkeypatch.setenv("LIMBO_TEST_STARTS", str(starts))
    out = tmp_path / "run"
    result = limbo("run", "--model", "costly/x", "--plugin", str(plugin), "--out", str(out),
                   "--quiet", "--max-cost", "0.5", "--fault", "none")
    assert result.returncode == 3, result.stderr  # stopped with cells left: its own status
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and "--max-cost" in manifest["stop_reason"]
    written = records(out)
    spent = sum(r["outcome"]["cost_usd"] for r in written)
    assert 0.4 < spent <= 0.5
    # Nothing was started and thrown away: one adapter for the up-front check, one per episode.
    assert len(starts.read_text().splitlines()) == len(written) + 1
    refused = limbo("run", "--model", "unpriced/x", "--plugin", str(plugin), "--out",
                    str(tmp_path / "refused"), "--max-cost", "1")
    assert refused.returncode == 2 and "no price known for unpriced/x" in refused.stderr
    assert not (tmp_path / "refused").exists()


def test_dry_run_prints_cells_and_calls_and_writes_nothing(tmp_path: Path) -> None:
    result = limbo("run", "e1s", "--dry-run", "--out", str(tmp_path / "x"))
    assert result.returncode == 0, result.stderr
    assert f"grid e1s: {len(expand(load_grid('e1s')).cells)} episodes" in result.stdout
    assert "no model calls (runs offline)" in result.stdout
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("setup", "args", "needle"), [
    (None, ["missing.toml"], "no grid 'missing.toml': not a file, and not a built-in grid (default"),
    ("models = [", ["bad.toml"], "is not valid TOML"),
    ('faults = ["timeout_pre", "nosuch"]', ["bad.toml"], "unknown fault 'nosuch' in grid; choose from:"),
    ("instances = -3", ["bad.toml"], "instances: Input should be greater than or equal to 1"),
    ("colour = 'blue'", ["bad.toml"], "colour: Extra inputs are not permitted"),
    (None, ["default", "--shard", "4/3"], "--shard 4/3: I must be between 1 and N (valid: 1/3 .. 3/3)"),
    (None, ["default", "--shard", "x"], "must look like I/N"),
])
def test_bad_grid_input_is_one_line_and_writes_nothing(tmp_path: Path, setup: str | None,
                                                       args: list[str], needle: str) -> None:
    if setup is not None:
        (tmp_path / "bad.toml").write_text(setup + "\n")
    out = tmp_path / "out"
    result = limbo("run", *args, "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not out.exists()


def test_a_repeated_plugin_with_workers_runs(tmp_path: Path, monkeypatch) -> None:
    plugin = tmp_path / "costly.py"
    plugin.write_text(COSTLY)
    monkeypatch.setenv("LIMBO_TEST_STARTS", str(tmp_path / "starts"))
    out = tmp_path / "run"
    result = limbo("run", "--model", "costly/x", "--plugin", str(plugin), "--plugin",
                   str(tmp_path / "." / "costly.py"), "--out", str(out), "--quiet",
                   "--workers", "2", "--template", "charge_invoice")
    assert result.returncode == 0, result.stderr
    assert len(records(out)) == 48
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_a_resumed_run_summarises_everything_recorded(tmp_path: Path) -> None:
    base = ["run", "--out", str(tmp_path), "--template", "charge_invoice"]
    assert limbo(*base, "--limit", "10", "--quiet").returncode == 0
    first = json.loads((tmp_path / "manifest.json").read_text())
    again = limbo(*base)
    assert again.returncode == 0, again.stderr
    assert "ran 230 episodes, 10 already done" in again.stdout
    assert "│ all                │      240 │" in again.stdout
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["started_at"] == first["started_at"] and manifest["resumed_at"]
