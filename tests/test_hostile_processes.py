"""Real processes against one run directory: two writers at the same moment, overlapping and
disjoint shards, twenty kill -9 rounds with workers, kill -9 at concurrency 64, Ctrl-C with
workers, a full disk. Nothing here waits for a time: every step waits for something observable
(a process's exit, a record count in the file, a claim held), so a loaded machine only makes it
slower."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.hostile import LIMBO, lines_of, records, spawn, write_plugin

from limbo.log.runlock import active_claims

GRID = ["default", "--model", "policy/verify"]  # 770 cells
DEADLINE_S = 600


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("reference")
    assert spawn("run", *GRID, "--out", str(out), "--quiet").returncode == 0
    return records(out)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([LIMBO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})},
                            start_new_session=True)


def until(condition, what: str) -> None:
    """Wait for ``condition()`` (polling); fail after a generous deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def count(run_dir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in run_dir.glob("episodes*.jsonl"))


GATE = '''
import asyncio, os
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("gated")
class Gated(PolicyAdapter):
    """policy/verify that waits at its first turn until the test opens the gate."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)

    async def generate(self, messages, tools, ctx):
        gate = os.environ.get("LIMBO_TEST_GATE")
        while gate and not os.path.exists(gate):
            await asyncio.sleep(0.02)
        return await super().generate(messages, tools, ctx)
'''
GATED = ["--model", "gated/x", "--template", "charge_invoice"]  # 48 cells


@pytest.fixture
def gated(tmp_path: Path):
    plugin = write_plugin(tmp_path, "gate", GATE)
    gate = tmp_path / "open"
    ref = tmp_path / "ref"
    assert spawn("run", *GATED, "--plugin", str(plugin), "--out", str(ref),
                 "--quiet").returncode == 0
    return ["--plugin", str(plugin), "--quiet"], {"LIMBO_TEST_GATE": str(gate)}, gate, records(ref)


def _first_exit(procs: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    until(lambda: any(p.poll() is not None for p in procs), "a process to exit")
    return next(p for p in procs if p.poll() is not None)


def test_two_runs_on_one_out_at_the_same_moment_one_refuses(tmp_path: Path, gated) -> None:
    """Must-show 2a."""
    flags, env, gate, reference = gated
    out = tmp_path / "out"
    procs = [start("run", *GATED, *flags, "--out", str(out), env=env) for _ in range(2)]
    loser = _first_exit(procs)
    winner = next(p for p in procs if p is not loser)
    _, err = loser.communicate()
    assert loser.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert f"is in use: another writer is running — pid {winner.pid} on " in err
    gate.touch()
    _, err = winner.communicate()
    assert winner.returncode == 0, err
    assert records(out) == reference  # zero duplicates, nothing missing


def test_overlapping_shards_at_the_same_moment_one_refuses(tmp_path: Path, gated) -> None:
    """Must-show 2b: shards 1/2 and 1/3 share cells; only one may write."""
    flags, env, gate, reference = gated
    out = tmp_path / "out"
    procs = {shard: start("run", *GATED, *flags, "--out", str(out), "--shard", shard, env=env)
             for shard in ("1/2", "1/3")}
    loser = _first_exit(list(procs.values()))
    _, err = loser.communicate()
    assert loser.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "which overlaps shard" in err and "is running — pid" in err
    gate.touch()
    for proc in procs.values():
        proc.communicate()
    lost = next(s for s, p in procs.items() if p is loser)
    assert spawn("run", *GATED, *flags, "--out", str(out), "--shard", lost).returncode == 0
    assert spawn("run", *GATED, *flags, "--out", str(out)).returncode == 0
    assert records(out) == reference


def test_disjoint_shards_run_in_parallel(tmp_path: Path, gated) -> None:
    flags, env, gate, reference = gated
    out = tmp_path / "out"
    procs = [start("run", *GATED, *flags, "--out", str(out), "--shard", f"{i}/3", env=env)
             for i in (1, 2, 3)]
    until(lambda: len(active_claims(out)) == 3 if out.is_dir() else False,
          "three shards holding their claims at once")
    gate.touch()
    for proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, err
    assert records(out) == reference


def test_twenty_kill_9_rounds_with_workers_resume_to_the_uninterrupted_records(
        tmp_path: Path, reference) -> None:
    """Must-show 2c: kill -9 at random moments (a random number of new records, sometimes
    none), the whole process group or only the parent, each followed by a resume."""
    rng = random.Random(20)
    out = tmp_path / "out"
    for _ in range(20):
        before = count(out) if out.exists() else 0
        proc = start("run", *GRID, "--out", str(out), "--quiet", "--workers", "2")
        target = before + rng.choice([0, 1, 5, 20, 40, 60])
        until(lambda p=proc, n=target: p.poll() is not None or (out.exists() and count(out) >= n),
              f"{target} records")
        group = rng.random() < 0.7
        with contextlib.suppress(ProcessLookupError):  # it may have finished on its own
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                os.kill(proc.pid, signal.SIGKILL)  # the parent only: its workers are orphaned
        proc.communicate()
    final = spawn("run", *GRID, "--out", str(out), "--quiet", "--workers", "2")
    assert final.returncode == 0, final.stderr
    assert records(out) == reference
    assert spawn("status", str(out)).returncode == 0


SLOW = '''
import asyncio, os
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("slow")
class Slow(PolicyAdapter):
    """policy/verify that thinks 20-300 ms a turn, and notes each episode's last turn."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)

    async def generate(self, messages, tools, ctx):
        await asyncio.sleep(0.02 + int(ctx.episode_id[-4:], 16) % 280 / 1000)
        turn = await super().generate(messages, tools, ctx)
        if not turn.tool_calls or turn.tool_calls[0].name == "finish":
            with open(os.environ["LIMBO_TEST_NOTES"], "a") as fh:
                fh.write(ctx.episode_id + "\\n")
        return turn
'''


def _ids_on_disk(run_dir: Path) -> set[str]:
    ids = set()
    for raw in lines_of(run_dir):
        if raw.endswith(b"\n"):
            ids.add(json.loads(raw)["episode_id"])
    return ids


def test_kill_9_at_concurrency_64_loses_only_the_episodes_in_flight(tmp_path: Path) -> None:
    """Must-show 4: every episode that had finished is on disk — all but, at most, the one
    between its last model turn and its record at the instant of the kill."""
    plugin = write_plugin(tmp_path, "slow", SLOW)
    notes, out = tmp_path / "notes", tmp_path / "out"
    proc = start("run", "default", "--model", "slow/x", "--plugin", str(plugin), "--out",
                 str(out), "--quiet", "--concurrency", "64",
                 env={"LIMBO_TEST_NOTES": str(notes)})
    until(lambda: out.exists() and count(out) >= 40, "40 records")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    finished = set(notes.read_text().split())
    on_disk = _ids_on_disk(out)
    assert len(on_disk) >= 40 and on_disk <= finished
    assert len(finished - on_disk) <= 1, len(finished - on_disk)


def test_ctrl_c_with_workers_is_one_line_and_the_resume_is_exact(tmp_path: Path,
                                                                 reference) -> None:
    out = tmp_path / "out"
    proc = start("run", *GRID, "--out", str(out), "--quiet", "--workers", "2")
    until(lambda: out.exists() and count(out) >= 100, "100 records")
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the foreground group
    _, err = proc.communicate()
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["limbo: interrupted; re-run the same command to resume"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["ran"] == len(records(out))
    again = spawn("run", *GRID, "--out", str(out), "--quiet", "--workers", "2")
    assert again.returncode == 0, again.stderr
    assert records(out) == reference


def _mount(path: Path, size: str) -> bool:
    path.mkdir(exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_is_one_line_a_failed_manifest_no_temporary_file_and_an_exact_resume(
        tmp_path: Path, reference, workers: str) -> None:
    """The disk is a real 1 MiB tmpfs (the records of this grid need about 4 MiB)."""
    disk = tmp_path / "disk"
    if not _mount(disk, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)")
    try:
        out = disk / "run"
        full = spawn("run", *GRID, "--out", str(out), "--quiet", "--workers", workers)
        assert full.returncode == 2
        assert full.stderr.strip().splitlines() == [
            f"limbo: error: cannot write {out}/episodes.jsonl: No space left on device"]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "failed" and "No space left" in manifest["stop_reason"]
        assert sorted(p.name for p in out.iterdir()) == [".writers.lock", "episodes.jsonl",
                                                         "manifest.json"]
        kept = records(out)  # every line complete and valid: the cut write was taken back
        assert 0 < len(kept) < len(reference) and manifest["ran"] == len(kept)
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = spawn("run", *GRID, "--out", str(out), "--quiet", "--workers", workers)
        assert again.returncode == 0, again.stderr
        assert f"ran {len(reference) - len(kept):,} episodes, {len(kept):,} already done" in again.stdout
        assert records(out) == reference
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)
