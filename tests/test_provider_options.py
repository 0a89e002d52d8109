"""Issue 28: the response cache and the price files reach a run's episodes from the run's
settings, bound around them (:mod:`limbo.providers.options`), never through a module global a
command set. Two runs in one process — one after the other, or at once on one event loop —
each price with their own file and cache in their own directory; forked workers and a Ray
worker price with ``--prices``. Real parts: the OpenAI SDK adapter over HTTP to a loopback
endpoint (:mod:`support.paced`), real forked processes, a real Ray worker.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import pytest
from support.cells import cell_for
from support.hostile import records, spawn
from support.paced import Pace, serve_in_thread

from limbo.log.records import EpisodeRecord
from limbo.providers import options
from limbo.providers.options import ProviderOptions
from limbo.run.context import Settings
from limbo.run.local import stream
from limbo.sim.cell import Cell

ROOT = Path(__file__).resolve().parents[1]
CELLS = 3
TOKENS_PER_EPISODE = 2 * 1000  # the paced endpoint: two calls of 1000 input tokens, 0 priced out


def priced(path: Path, usd_per_mtok: float) -> str:
    path.write_text(f'["openai/paced"]\ninput = {usd_per_mtok}\noutput = 0\n')
    return str(path)


def cells(url: str) -> list[Cell]:
    model = f"openai/paced?api=chat&base_url={url}/v1"
    return [cell_for("charge_invoice", fault="none", model=model, seed=seed)
            for seed in range(CELLS)]


async def one_run(url: str, chosen: ProviderOptions) -> list[EpisodeRecord]:
    got: list[EpisodeRecord] = []
    await stream(iter(cells(url)), Settings(concurrency=2, providers=chosen),
                 lambda _cell, record: got.append(record))
    return got


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ProviderOptions, ...]:
    """Two runs' options: a cent per million input tokens and its double, two cache dirs."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    return tuple(ProviderOptions(cache_root=str(tmp_path / f"cache-{n}"),
                                 price_files=(priced(tmp_path / f"prices-{n}.toml", n),))
                 for n in (1, 2))


def assert_own(got: list[EpisodeRecord], chosen: ProviderOptions, usd_per_mtok: int) -> None:
    assert [r["outcome"]["termination"] for r in got] == ["finished"] * CELLS
    assert {r["outcome"]["cost_usd"] for r in got} == {TOKENS_PER_EPISODE * usd_per_mtok / 1e6}
    assert chosen.cache_root is not None
    assert len(list(Path(chosen.cache_root).glob("*/*.json"))) == 2 * CELLS


def test_two_runs_one_after_the_other_each_see_only_their_own(runs) -> None:
    with serve_in_thread(Pace(latency_s=0.01)) as server:
        first = asyncio.run(one_run(server.url, runs[0]))
        second = asyncio.run(one_run(server.url, runs[1]))
        answered = server.counts.answered
    assert_own(first, runs[0], 1)
    assert_own(second, runs[1], 2)  # the first's file and cache are not the second's
    assert answered == 2 * 2 * CELLS  # no call of the second answered from the first's cache
    assert options.current() is None


def test_two_runs_at_once_on_one_loop_each_see_only_their_own(runs) -> None:
    async def both() -> tuple[list[EpisodeRecord], list[EpisodeRecord]]:
        a, b = await asyncio.gather(one_run(server.url, runs[0]), one_run(server.url, runs[1]))
        return a, b

    with serve_in_thread(Pace(latency_s=0.05)) as server:
        first, second = asyncio.run(both())
        answered = server.counts.answered
    assert_own(first, runs[0], 1)
    assert_own(second, runs[1], 2)
    assert answered == 2 * 2 * CELLS


def test_forked_workers_price_and_cache_with_the_flags(tmp_path: Path) -> None:
    """Both workers price with ``--prices`` and write to ``--cache-dir``: a second run into
    another directory is answered from that cache alone, at the same cost."""
    prices = priced(tmp_path / "prices.toml", 3)
    with serve_in_thread(Pace(latency_s=0.01)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        for out in ("first", "second"):
            done = spawn("run", "default", "--model", spec, "--limit", "8", "--workers", "2",
                         "--concurrency", "2", "--prices", prices, "--cache-dir",
                         str(tmp_path / "cache"), "--out", str(tmp_path / out), "--quiet",
                         env={"OPENAI_API_KEY": "sk-test-not-a-real-key"})
            assert done.returncode == 0, done.stderr
            if out == "first":
                answered = server.counts.answered
        assert server.counts.answered == answered > 0  # the second run made no call
    for out in ("first", "second"):
        got = records(tmp_path / out)
        assert len(got) == 8 and {r["outcome"]["cost_usd"] for r in got} == {0.006}
    manifest = json.loads((tmp_path / "first" / "manifest.json").read_text())
    assert manifest["prices"] == [prices]


# ------------------------------------------------------------------ no module-level settings

OPTION_MODULES = ["limbo/providers/cache.py", "limbo/providers/pricing.py",
                  "limbo/providers/options.py"]
MUTABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def module_state(source: str) -> list[int]:
    """Lines of ``source`` holding module-level mutable state: a module-level name bound to a
    list, dict or set (a literal, or ``list()``/``dict()``/``set()``/``defaultdict()``), or a
    ``global`` statement (a function rebinding a module's name)."""
    tree = ast.parse(source)
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Global)]
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, MUTABLE) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and value.func.id in ("list", "dict", "set", "defaultdict")):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_cache_and_price_modules_hold_no_module_level_state() -> None:
    found = {m: lines for m in OPTION_MODULES if (lines := module_state((ROOT / m).read_text()))}
    assert found == {}


@pytest.mark.parametrize("source", [
    "from pathlib import Path\n_extra_files: list[Path] = []\n",  # what pricing.py held
    "_configured = {}\n", "_seen = set()\n", "x = None\ndef f():\n    global x\n    x = 1\n"])
def test_the_state_check_finds_each_kind(source: str) -> None:
    assert module_state(source) != []
    assert module_state("ENV = 'LIMBO_PRICES'\nKEYS = ('a', 'b')\n") == []
