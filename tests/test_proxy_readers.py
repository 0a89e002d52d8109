"""The proxy's records are LIMBO's records: ``limbo status``, ``show``, ``compare``, ``report``
and the tables' loader read two proxied episodes of the same cell under two faults (``none``
and ``timeout_post``, the same scripted client re-issuing blindly) like any other run."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from support.proxy_runs import LIMBO, Agent, proxy_args, run_stdio

from limbo.analysis.loader import load
from limbo.log.reader import validate


async def blind(agent: Agent) -> None:
    ok, _ = await agent.call("create_order", agent.order())
    if not ok:
        await agent.call("create_order", agent.order())
    await agent.finish()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run directory (and one database): the cell under ``none``, then ``timeout_post``."""
    tmp = tmp_path_factory.mktemp("proxy-readers")
    run_stdio(tmp, "none", blind)
    params = StdioServerParameters(command=LIMBO, env=dict(os.environ), args=proxy_args(
        tmp / "orders.db", tmp / "run", "timeout_post", "orders_place"))

    async def again() -> None:
        async with Client(params, cache=None) as client:
            prompt = (await client.get_prompt("task")).messages[0].content.text
            await blind(Agent(client, prompt))

    asyncio.run(again())
    records = tmp / "run" / "episodes.jsonl"
    deadline = time.monotonic() + 60
    while len(records.read_text().splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return tmp / "run"


def _limbo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=300)


def test_status_counts_each_proxied_episode_as_a_cell(run_dir: Path) -> None:
    done = _limbo("status", str(run_dir))
    assert done.returncode == 0, done.stdout
    assert "episodes: 2 done, 0 missing" in done.stdout and "verdict: OK" in done.stdout


def test_the_loader_reads_every_record_without_a_problem(run_dir: Path) -> None:
    loaded = load([run_dir])
    assert loaded.problems == []
    frame = loaded.frame.set_index("fault")
    assert sorted(frame.index) == ["none", "timeout_post"]
    assert bool(frame.loc["timeout_post", "duplicate"]) and not frame.loc["none", "duplicate"]
    assert frame.loc["timeout_post", "family"] == "read-back resolves"
    assert frame.loc["timeout_post", "read_path"] == "strong"
    for line in (run_dir / "episodes.jsonl").read_text().splitlines():
        validate(json.loads(line))


def test_compare_pairs_the_two_faults(run_dir: Path) -> None:
    done = _limbo("compare", str(run_dir), "--by", "fault", "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = {(r[1], r[2]): r[3] for r in csv.reader(done.stdout.splitlines()) if len(r) > 3}
    assert rows[("overall / dup", "pairs")] == "1"
    assert rows[("overall / dup", "A (%)")] == "0.0" and rows[("overall / dup", "B (%)")] == "100.0"


def test_show_and_report_read_the_episodes(run_dir: Path, tmp_path: Path) -> None:
    first = json.loads((run_dir / "episodes.jsonl").read_text().splitlines()[1])
    shown = _limbo("show", str(run_dir), first["episode_id"])
    assert shown.returncode == 0 and "FAULT timeout_post" in shown.stdout
    assert "COMMIT #1 orders_create_order [reissue-1]" in shown.stdout
    report = _limbo("report", str(run_dir), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    assert "(2 episodes" in report.stdout + report.stderr
