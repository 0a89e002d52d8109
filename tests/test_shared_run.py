"""Issue 28 part C: ``--max-cost`` and the adaptive call limiter with ``--workers 2`` — real
forked processes, a real loopback model endpoint (the OpenAI SDK over HTTP) that refuses with
``429`` past three calls in flight. One budget and one limiter for both workers; nothing here
times anything. Also: no module of the run floor writes ``os.environ`` (an AST check).
"""

from __future__ import annotations

import ast
import asyncio
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.hostile import LIMBO, records

from limbo.run.budget import SharedBudget, Spend

ROOT = Path(__file__).resolve().parents[1]

PRICED = '''
import asyncio
import os

from limbo.episode.models import model_adapter
from limbo.log.records import Usage
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("billed")
class Billed(PolicyAdapter):
    """policy/verify billing one cent per call; notes the process of each episode it starts."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)
        with open(os.environ["LIMBO_TEST_STARTS"], "a") as fh:
            fh.write(f"{os.getpid()}\\n")

    @classmethod
    def price_per_mtok(cls, model, params):
        return {"input": 1.0, "cached_input": 0.5, "output": 2.0}

    async def generate(self, messages, tools, ctx):
        await asyncio.sleep(0.01)  # a provider's latency, so that both workers get cells
        turn = await super().generate(messages, tools, ctx)
        return turn.model_copy(update={"usage": Usage(input_tokens=10, cost_usd=0.01)})
'''


def limbo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def test_the_budget_arithmetic_counts_every_process_in_flight() -> None:
    spend = Spend(max_cost=1.0)
    assert spend.admit() and spend.admit()  # nothing spent yet: the mean is 0
    spend.settle(0.3)
    spend.settle(0.3)
    assert spend.admit()  # 0.6 + 1 x 0.3 <= 1
    assert not spend.admit()  # 0.6 + 2 x 0.3 > 1: refused, counting the one in flight
    spend.settle(0.3)
    assert not spend.admit() and spend.closed  # closed for good, even as money is left
    assert (spend.spent, spend.ended, spend.in_flight) == (pytest.approx(0.9), 3, 0)


def test_a_shared_budget_is_one_budget_across_forked_processes() -> None:
    import multiprocessing

    budget = SharedBudget(max_cost=1.0)
    asyncio.run(budget.admit())
    asyncio.run(budget.settle(0.25))

    def child() -> None:  # another process spends on the same budget
        asyncio.run(budget.admit())
        asyncio.run(budget.settle(0.25))

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    state = budget.state()
    assert (state.spent, state.ended, state.in_flight) == (0.5, 2, 0)
    assert asyncio.run(budget.admit()) and asyncio.run(budget.admit())  # 0.5 + 2 x 0.25 = 1
    assert not asyncio.run(budget.admit()) and budget.closed()


def one_budget_then_resume(run: Callable[..., subprocess.CompletedProcess[str]], argv: list[str],
                           env: dict[str, str], out: Path, starts: Path) -> list[dict[str, Any]]:
    """Run ``argv`` under ``--max-cost 0.5``, then again under a budget that fits the rest: the
    first pass stops at one budget summed over both workers, having started no episode it threw
    away; the second completes the run and leaves the first pass's records untouched. Returns
    the records of the whole run."""
    first = run(*argv, "--max-cost", "0.5", env=env)
    assert first.returncode == 3, first.stderr  # the budget stopped it with cells left
    assert "Traceback" not in first.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "stopped" and "--max-cost 0.5" in manifest["stop_reason"]
    written = records(out)
    spent = sum(r["outcome"]["cost_usd"] for r in written)
    # Summed over both workers (each alone would have spent up to 0.5): within the budget,
    # since the episodes cost alike, and no episode was started and thrown away.
    assert 0.4 < spent <= 0.5
    started = starts.read_text().splitlines()
    workers = set(started[1:])  # the first: the command's own up-front check of the model
    assert len(workers) == 2 and started[0] not in workers
    assert len(started) == len(written) + 1 == manifest["ran"] + 1
    assert len({r["episode_id"] for r in written}) == len(written) < manifest["to_run"]

    again = run(*argv, "--max-cost", "100", env=env)
    assert again.returncode == 0, again.stderr
    done = records(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["already_done"] == len(written)
    assert len({r["episode_id"] for r in done}) == len(done) == manifest["cells"]
    by_id = {r["episode_id"]: r for r in done}
    assert all(by_id[r["episode_id"]] == r for r in written)  # the first pass's, untouched
    return done


def test_max_cost_with_two_workers_stops_at_one_budget_and_resumes(tmp_path: Path) -> None:
    plugin, starts, out = tmp_path / "billed.py", tmp_path / "starts", tmp_path / "run"
    plugin.write_text(PRICED)
    env = {"LIMBO_TEST_STARTS": str(starts)}
    argv = ["run", "--model", "billed/x", "--plugin", str(plugin), "--fault", "none", "--out",
            str(out), "--quiet", "--workers", "2", "--concurrency", "2"]
    done = one_budget_then_resume(limbo, argv, env, out, starts)
    assert len(starts.read_text().splitlines()) == len(done) + 2  # a check per pass


def test_a_429_storm_slows_both_workers_through_one_limiter(tmp_path: Path) -> None:
    """Two workers of eight episodes in flight each against an endpoint that takes three calls
    at a time: every refusal either worker saw reached the one limiter, which both used, and
    its limit came down to what the endpoint accepts; no episode ran out of attempts."""
    from support.paced import Pace, serve_in_thread

    out = tmp_path / "run"
    with serve_in_thread(Pace(latency_s=0.05, max_in_flight=3, retry_after_s=0.1)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        done = limbo("run", "default", "--model", spec, "--limit", "48", "--concurrency", "8",
                     "--workers", "2", "--out", str(out), "--no-cache", "--quiet")
        answered, refused = server.counts.answered, server.counts.refused
        peak = server.counts.peak_in_flight
    assert done.returncode == 0, done.stderr
    got = records(out)
    assert [r["outcome"]["termination"] for r in got] == ["finished"] * 48
    assert answered == 96 and peak <= 3 and refused > 0
    (limits,) = json.loads((out / "manifest.json").read_text())["limiter"].values()
    assert limits["workers"] == 2  # one limiter, leased by both workers
    assert limits["refused"] == refused  # every 429, whichever worker got it
    assert limits["lowest"] <= 3  # down from 128 to what the endpoint takes
    assert answered + refused - 8 <= limits["calls"] <= answered + refused


def test_precision_rounds_on_workers_keep_one_limiter_through_every_round(tmp_path: Path) -> None:
    """``--precision`` runs round after round on the same two workers, against an endpoint
    that takes one call at a time: every round's calls lease their slots and report their
    ``429``s to the one limiter. (A worker's limiter client was stranded on the first round's
    event loop: the next round that needed a slot or saw a refusal waited forever.)"""
    from support.paced import Pace, serve_in_thread

    out = tmp_path / "run"
    with serve_in_thread(Pace(latency_s=0.02, max_in_flight=1, retry_after_s=0.05)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        done = subprocess.run(
            [LIMBO, "run", str(ROOT / "examples" / "precision.toml"), "--model", spec,
             "--instances", "12", "--precision", "dup:0.12", "--workers", "2",
             "--concurrency", "4", "--out", str(out), "--no-cache", "--quiet"],
            capture_output=True, text=True, timeout=300)
        answered, refused = server.counts.answered, server.counts.refused
    assert done.returncode == 0, done.stderr[-2000:]
    got = records(out)
    assert [r["outcome"]["termination"] for r in got] == ["finished"] * 24
    manifest = json.loads((out / "manifest.json").read_text())
    precision = manifest["precision"]
    assert precision["arms"][0]["worlds"] == 12
    assert 12 // precision["worlds_per_round"] >= 2  # a round after the first, on the same workers
    (limits,) = manifest["limiter"].values()
    assert answered == 48 and refused > 0 and limits["workers"] == 2
    assert limits["refused"] == refused  # every round's 429s, whichever worker got them
    assert answered + refused - 8 <= limits["calls"] <= answered + refused


def test_a_worker_opens_one_connection_to_the_limiter_host_however_many_calls_start_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first calls of a worker's episodes start together; they must share one connection,
    since the keeper gives back a lessee's slots when any of its connections closes."""
    from limbo.run.limiter_host import LimiterHost, SocketHost

    opened: list[str] = []
    real_open = asyncio.open_unix_connection

    async def counted(path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        opened.append(path)
        return await real_open(path)

    monkeypatch.setattr(asyncio, "open_unix_connection", counted)
    host = LimiterHost()
    try:
        async def first_calls() -> list[tuple[int, int]]:
            client = SocketHost(host.path)
            return list(await asyncio.gather(*(client.snapshot() for _ in range(8))))

        answers = asyncio.run(first_calls())
    finally:
        host.close()
    assert len(answers) == 8 and len({a for a in answers}) == 1  # every call was answered
    assert opened == [host.path]


def test_a_limiter_host_closing_on_a_connected_worker_lets_it_go_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """The host closes while a worker is still connected (its last call answered): the
    worker's handler ends as a handler, and nothing is logged (Python 3.11's stream server
    logged a cancelled handler as an error with its traceback, which a run printed on
    stderr)."""
    import socket

    from limbo.run.limiter_host import LimiterHost

    host = LimiterHost()
    worker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        worker.connect(host.path)
        worker.sendall(json.dumps([1, "snapshot", []]).encode() + b"\n")
        assert json.loads(worker.makefile("rb").readline())[0] == 1  # its handler is running
        with caplog.at_level("DEBUG"):
            host.close()
        assert not host.thread.is_alive()
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    finally:
        worker.close()


def test_an_in_process_run_records_no_shared_limiter(tmp_path: Path) -> None:
    done = limbo("run", "default", "--limit", "3", "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "limiter" not in json.loads((tmp_path / "run" / "manifest.json").read_text())


# ------------------------------------------------------------------ no settings in os.environ


def environ_writes(source: str) -> list[int]:
    """Lines of ``source`` that write ``os.environ`` (assign, delete, update, pop, setdefault,
    clear, putenv, unsetenv) or hand it whole to a call that could."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_environ(node.value) and node.attr in (
                "update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(
                node.ctx, ast.Store | ast.Del):
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ("putenv", "unsetenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            lines.append(node.lineno)
    return sorted(lines)


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


RUN_FLOOR = ["limbo/run", "limbo/commands"]
"""Where a run's settings are read and handed to its workers."""


def test_no_module_of_the_run_or_its_commands_writes_os_environ() -> None:
    writes = {str(p.relative_to(ROOT)): found for d in RUN_FLOOR
              for p in sorted((ROOT / d).rglob("*.py"))
              if (found := environ_writes(p.read_text()))}
    assert writes == {}


@pytest.mark.parametrize("line", [
    "os.environ['A'] = 'b'", "del os.environ['A']", "os.environ.update(x)",
    "os.environ.pop('A', None)", "os.environ.setdefault('A', 'b')", "os.putenv('A', 'b')"])
def test_the_environ_check_finds_each_kind_of_write(line: str) -> None:
    assert environ_writes(f"import os\n\n\ndef f(x):\n    {line}\n") == [5]
    assert environ_writes("import os\nvalue = os.environ.get('A')\n") == []
