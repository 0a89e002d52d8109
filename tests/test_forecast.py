"""The forecast of a real-model pass: its statistics (a ratio estimator over cell shapes, with
a Student-t prediction interval), the pilot that feeds it, and the run that records it beside
what it spent — against a local priced OpenAI-compatible server (``support.bad_server``)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from support.bad_server import BadServer, acting
from support.hostile import cli, records, refused, untouched

from limbo.run.forecast import ratio_total, t975

GRID = ["e1", "--template", "charge_invoice", "--instances", "2", "--quiet"]
PRICES = '["openai/m"]\ninput = 2.0\ncached_input = 0.5\noutput = 8.0\n'


def test_student_t_points_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    for df in (*range(1, 40), 45, 50, 75, 100, 150, 200, 500, 10_000):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-3), df


def test_a_model_proportional_to_its_shape_is_forecast_exactly() -> None:
    """The estimate is exact; the interval is narrow but not zero: four worlds that agreed
    exactly do not prove the next ones will (the floor on the spread)."""
    pairs = [(w, x, 3.0 * x) for w, x in enumerate((1.0, 2.0, 5.0, 7.0))]
    got = ratio_total(pairs, [(10, 2.0), (11, 4.0), (12, 6.0)], 3)
    assert got.estimate == pytest.approx(36.0)
    assert got.low is not None and got.high is not None
    assert 25.0 < got.low < 36.0 < got.high < 47.0


def test_with_nothing_observed_the_estimate_is_the_shape_and_has_no_interval() -> None:
    got = ratio_total([], [(0, 2.0), (1, 4.0)], 4)  # a sample of 2 of 4 cells: scaled up
    assert got.estimate == pytest.approx(12.0) and got.low is None and got.high is None
    one = ratio_total([(0, 2.0, 5.0), (0, 1.0, 2.0)], [(0, 2.0), (1, 4.0)], 2)
    assert one.estimate == pytest.approx(14.0) and one.low is None  # one world: no spread


@pytest.mark.parametrize("shared", [0.0, 0.5])
def test_the_interval_covers_at_its_level_in_a_seeded_simulation(shared: float) -> None:
    """Grids of 3 to 12 worlds, each cell's cost r times its shape times a factor of its
    world's (log-spread ``shared``: 0, no world effect; 0.5, a strong one) and one of its own;
    a pilot of 3 to 8 cells drawn at random; the interval for the rest holds in at least 90 %
    of 400 trials that have an interval (its nominal level is 95 %), while a ±10 % band around
    the same estimate does not. (A pilot whose cells all fell in one world has no interval.)"""
    rng = random.Random(7)
    held = band = judged = 0
    trials = 400
    for _ in range(trials):
        worlds = rng.randint(3, 12)
        factor = [rng.lognormvariate(0, shared) for _ in range(worlds)]
        cells = [(rng.randrange(worlds), rng.choice([1.0, 2.0, 3.0, 6.0]))
                 for _ in range(rng.randint(20, 120))]
        r, own = rng.uniform(0.3, 3.0), rng.uniform(0.05, 0.4)
        costs = [r * x * factor[w] * rng.lognormvariate(0, own) for w, x in cells]
        pilot = set(rng.sample(range(len(cells)), rng.randint(3, 8)))
        rest = [i for i in range(len(cells)) if i not in pilot]
        got = ratio_total([(*cells[i], costs[i]) for i in pilot], [cells[i] for i in rest],
                          len(rest))
        actual = sum(costs[i] for i in rest)
        judged += got.low is not None
        held += got.holds(actual) is True
        band += abs(actual - got.estimate) <= 0.1 * got.estimate
    assert judged >= 0.95 * trials
    assert held / judged >= 0.90, held / judged
    assert band / trials < 0.9


def _model(server: BadServer) -> str:
    return f"openai/m?api=chat&base_url={server.url}&max_attempts=1"


def _acting(server: BadServer, tmp_path: Path) -> tuple[Path, list[str]]:
    """``server`` acting as the agent; the run directory, and the command that runs the grid
    against it, priced."""
    out, prices = tmp_path / "run", tmp_path / "prices.toml"
    prices.write_text(PRICES)
    server.respond = acting()
    return out, ["run", *GRID, "--no-cache", "--model", _model(server), "--out", str(out),
                 "--prices", str(prices)]


def test_a_dry_run_pilot_then_the_run_records_forecast_and_actual(capsys, tmp_path) -> None:
    with BadServer() as server:
        out, base = _acting(server, tmp_path)
        guess = cli(capsys, *base, "--dry-run")
        assert guess.code == 0 and "a guess from the cells' shapes alone" in guess.out
        untouched(out)
        assert not server.requests

        piloted = cli(capsys, *base, "--dry-run", "--pilot", "3")
        assert piloted.code == 0, piloted.out
        assert len(records(out)) == 3 and len(server.requests) == 6  # two turns each
        line = next(x for x in piloted.out.splitlines() if x.startswith("forecast (95%"))
        assert " model calls [" in line and "$" in line
        assert "from 3 episodes observed in 3 worlds" in piloted.out
        again = cli(capsys, *base, "--dry-run", "--pilot", "3")
        assert "nothing to run" in again.out and len(records(out)) == 3  # a top-up: none

        ran = cli(capsys, *base)
    assert ran.code == 0 and "forecast (95% intervals)" in ran.out
    manifest = json.loads((out / "manifest.json").read_text())
    forecast, actual = manifest["forecast"], manifest["actual"]
    assert forecast["cells"] == manifest["to_run"] == 45 and forecast["level"] == 0.95
    written = (out / "episodes.jsonl").read_bytes()[manifest["records_offset"]:]
    this_pass = [json.loads(line) for line in written.splitlines()]
    billed = sum(r["runtime"]["model_calls"]["billed_usd"] for r in this_pass)
    assert len(this_pass) == actual["episodes"] == 45 and actual["cached"] == 0
    assert actual["calls"] == 90 and actual["usd"] == pytest.approx(billed, rel=1e-9)
    assert forecast["calls"]["low"] <= actual["calls"] <= forecast["calls"]["high"]
    assert forecast["usd"]["low"] <= actual["usd"] <= forecast["usd"]["high"]
    status = cli(capsys, "status", str(out))
    spent = next(x for x in status.out.splitlines() if "spent vs forecast" in x)
    assert "(45 episodes)" in spent and spent.count("— inside") == 3, spent
    info = json.loads(cli(capsys, "status", str(out), "--json").out)
    assert info["passes"][0]["spent"] == actual
    shown = RUNS.read_text().split("## What a pass will cost", 1)[1].split("```text\n")[1]
    example = shown.split("```")[0].splitlines()
    assert _form(example[0]) == _form(line)  # the docs show what a run prints
    assert _form(example[-1].strip()) == _form(spent.strip())


RUNS = Path(__file__).resolve().parents[1] / "docs" / "runs.md"


def _form(line: str) -> str:
    """A line with its numbers blanked: what the docs' example shares with any run."""
    return re.sub(r"\d[\d.,]*", "N", line)


def test_status_reads_what_a_pass_spent_so_far_from_its_records(capsys, tmp_path) -> None:
    """A pass that died (no ``actual`` in its manifest) has spent what its records say, from
    where it began writing."""
    with BadServer() as server:
        out, base = _acting(server, tmp_path)
        assert cli(capsys, *base, "--dry-run", "--pilot", "2").code == 0
        assert cli(capsys, *base, "--limit", "5").code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    actual = manifest.pop("actual")
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    info = json.loads(cli(capsys, "status", str(out), "--json").out)
    so_far = info["passes"][0]["spent"]
    assert so_far["episodes"] == 5 == actual["episodes"]
    assert so_far["usd"] == pytest.approx(actual["usd"]) and so_far["calls"] == actual["calls"]
    assert so_far["wall_s"] is None
    assert manifest["forecast"]["cells"] == 5  # --limit: the forecast is of this pass


def test_a_cached_grid_is_forecast_free(capsys, tmp_path) -> None:
    """Run a grid with the cache on, then forecast the same grid into a new directory: every
    cell's first response is in the cache, so the forecast is $0 and no calls — and the run
    that follows bills nothing and makes no call, as forecast."""
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    cache = ["--cache-dir", str(tmp_path / "cache"), "--prices", str(prices)]
    with BadServer() as server:
        server.respond = acting()
        first = ["run", *GRID, *cache, "--model", _model(server)]
        assert cli(capsys, *first, "--out", str(tmp_path / "a")).code == 0
        calls = len(server.requests)
        assert cli(capsys, *first, "--out", str(tmp_path / "b"), "--dry-run", "--pilot",
                   "2").code == 0
        dry = cli(capsys, *first, "--out", str(tmp_path / "b"), "--dry-run")
        assert "46 of the 46 episodes start from the cache" in dry.out, dry.out
        assert "$0 [0, 0], 0 model calls [0, 0]" in dry.out and "about 0 s of wall" in dry.out
        ran = cli(capsys, *first, "--out", str(tmp_path / "b"))
        assert ran.code == 0 and len(server.requests) == calls
    actual = json.loads((tmp_path / "b" / "manifest.json").read_text())["actual"]
    assert actual["usd"] == 0 and actual["calls"] == 0 and actual["cached"] == 92


def test_the_pilot_is_asked_for_properly(capsys) -> None:
    refused(cli(capsys, "run", *GRID, "--pilot", "3"), "give it with --dry-run")
    refused(cli(capsys, "run", *GRID, "--dry-run", "--pilot", "0"), "at least 1")


def test_the_pilot_draws_the_same_cells_whatever_their_order() -> None:
    from limbo.commands.run_forecast import pilot_cells
    from limbo.experiments.grid import expand, load_grid, validated
    from limbo.run.plan import plan

    grid = validated({**load_grid("e1").model_dump(), "templates": ["charge_invoice"],
                      "models": ["openai/a", "openai/b"], "instances": 3}, "test")
    cells = expand(grid).cells
    chosen = pilot_cells(cells, plan(cells, None), None, set(), 4)
    shuffled = list(reversed(cells))
    assert pilot_cells(shuffled, plan(shuffled, None), None, set(), 4) == chosen
    by_model = {m: [c for c in cells if c.episode_id in chosen and c.model == m]
                for m in ("openai/a", "openai/b")}
    assert [len(v) for v in by_model.values()] == [4, 4]
    assert len({c.template + c.fault for c in by_model["openai/a"]}) > 1  # not the first four


@pytest.mark.parametrize(("hits", "model", "total"), [
    (1, "; 1 starts from the response cache", "; 1 of the 2 episodes starts from the cache"),
    (2, "; 2 start from the response cache", "; 2 of the 2 episodes start from the cache")])
def test_the_cache_count_agrees_with_its_verb(hits, model, total) -> None:
    from limbo.run.forecast import Foreseen
    from limbo.run.outlook import ModelForecast, PassForecast, model_line, total_line

    m = ModelForecast("openai/m", 2, 0, 0, hits, None, Foreseen(4.0), Foreseen(2.0), True)
    assert model in model_line(m)
    assert total_line(PassForecast([m], 2)).endswith(total)
