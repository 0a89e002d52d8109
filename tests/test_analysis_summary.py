"""Every run has numbers (issue 35, must-show 2): Table 0 and Figure 0 for the README's
``limbo run`` (the default grid), a world-file grid, a ``limbo mcp`` run and a ``limbo proxy``
run — each row of the summary recounted here from the raw records — and ``limbo figures``
exits non-zero, saying why, when it can draw nothing."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from support.summary_runs import mcp_episode, proxy_run, records

LIMBO = str(Path(sys.executable).parent / "limbo")
ROOT = Path(__file__).resolve().parents[1]
METRICS = {"dup": "duplicate", "TS": "task_success", "EOS": "exactly_once",
           "overclaim": "overclaim"}
Row = dict[str, Any]


def limbo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LIMBO_HARNESS_DIR": os.devnull + ".none"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("summary")
    for name, grid in (("default", "default"),
                       ("world", str(ROOT / "tests" / "fixtures" / "release_run" / "world.toml"))):
        done = limbo("run", grid, "--out", str(root / name), "--workers", "2", "--quiet")
        assert done.returncode == 0, done.stderr
    for fault in ("http500_post", "timeout_post", "none"):
        mcp_episode(root / "mcp", fault)
    (root / "proxy").mkdir()
    return {"default": root / "default", "world": root / "world", "mcp": root / "mcp",
            "proxy": proxy_run(root / "proxy")}


def world_of(run: Path) -> str:
    manifest = json.loads((run / "manifest.json").read_text())
    if isinstance(manifest.get("world"), str):
        return manifest["world"]
    return manifest["worlds"][0]["identity"] if manifest.get("worlds") else "built-in"


def arm(row: Row) -> str:
    parts = [row["model"], *([row["harness"]] if row["harness"] != "minimal" else []),
             *([row["condition"]] if row["condition"] != "vanilla" else [])]
    return " · ".join(parts)


def by_row(run: Path) -> dict[str, list[Row]]:
    """The run's records by the summary's row key: arm / contract / world / family."""
    found: dict[str, list[Row]] = defaultdict(list)
    world = world_of(run)
    for r in records(run):
        found[f"{arm(r)} / {r['contract']} / {world} / {r['family']}"].append(r)
    return found


def summary(*runs: Path) -> dict[tuple[str, str], dict[str, str]]:
    done = limbo("tables", *map(str, runs), "--table", "0", "--format", "csv")
    assert done.returncode == 0, done.stderr
    return {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(done.stdout))}


def check_row(cells: dict[tuple[str, str], dict[str, str]], key: str, rows: list[Row]) -> None:
    """Each rate of the row recounted: equal weight per template over rated episodes."""
    rated = [r for r in rows if r["rated"]]
    assert int(cells[(key, "episodes")]["shown"]) == len(rows)
    for column, outcome in METRICS.items():
        cell = cells[(key, column)]
        if not rated:
            assert cell["shown"] == "—"
            continue
        size: dict[str, int] = defaultdict(int)
        for r in rated:
            size[r["template"]] += 1
        value = sum(1 / size[r["template"]] for r in rated if r[outcome]) / len(size)
        assert cell["unit"] == "%", (key, column)  # the CSV's rates are in percent, as shown
        assert float(cell["value"]) == pytest.approx(100 * value, rel=1e-12), (key, column)
        assert int(float(cell["numerator"])) == sum(bool(r[outcome]) for r in rated)
        assert int(float(cell["denominator"])) == len(rated)


@pytest.mark.parametrize("name", ["default", "world", "mcp", "proxy"])
def test_the_summary_and_its_figure_for_every_kind_of_run(runs: dict[str, Path], name: str,
                                                         tmp_path: Path) -> None:
    expected = by_row(runs[name])
    cells = summary(runs[name])
    assert {row for row, _ in cells if row not in ("caveat", "note", "provenance")} == \
        set(expected)
    for key, rows in expected.items():
        check_row(cells, key, rows)
    done = limbo("figures", str(runs[name]), "--out", str(tmp_path / "figures"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "figures" / "figure0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figure 0 not drawn" not in done.stderr
    from limbo.analysis.data import Data
    from limbo.analysis.figures import FIGURES
    from limbo.analysis.loader import load

    drawn = FIGURES[0](Data(load([runs[name]])))
    labels = [t.get_text() for t in drawn.figure.axes[0].get_yticklabels()]
    contracts = len({key.split(" / ")[1] for key in expected}) > 1
    lines = {" | ".join(key.split(" / ")[:2 if contracts else 1])
             for key, rows in expected.items() if any(r["rated"] for r in rows)}
    assert len(labels) == len(lines) and set(labels) == lines


def test_runs_of_every_kind_side_by_side_keep_their_own_rows(runs: dict[str, Path]) -> None:
    """Loaded together, each row is still its own run's: no row pools two kinds of run."""
    cells = summary(*runs.values())
    for run in runs.values():
        for key, rows in by_row(run).items():
            check_row(cells, key, rows)
    proxy = by_row(runs["proxy"])
    assert all(" · proxy / native / orders@" in key for key in proxy)


def test_figures_exit_non_zero_when_nothing_can_be_drawn(tmp_path: Path) -> None:
    """An mcp run whose agent never called the focal write: no rated episode, no figure."""
    mcp_episode(tmp_path / "idle", "http500_post", blind=False)
    done = limbo("figures", str(tmp_path / "idle"), "--out", str(tmp_path / "figures"))
    assert done.returncode == 1
    assert "figure 0 not drawn: no rated episode" in done.stderr
    assert "no figure drawn" in done.stderr and "Traceback" not in done.stderr
    cells = summary(tmp_path / "idle")
    (key,) = {row for row, _ in cells if row not in ("caveat", "note", "provenance")}
    assert cells[(key, "dup")]["shown"] == "—" and cells[(key, "episodes")]["shown"] == "1"


def test_limbo_view_opens_on_the_summary(runs: dict[str, Path]) -> None:
    """What `limbo view` serves (its live site): the summary is the first section, with the
    mcp and proxy runs' rows, though no paper table holds them."""
    from limbo.analysis.report.serve import Live
    from limbo.commands.common import builtin_design

    page = Live([runs["mcp"], runs["proxy"]], "template", builtin_design).get("index.html")
    text = page.decode()
    assert text.index("<section") == text.index("<section id='summary'>")  # first
    summary = text[text.index("<section id='summary'>"):text.index("<section id='runs'>")]
    assert "Table 0: Summary" in summary and "figure-0" in summary
    assert "external/mcp-client · mcp" in summary and "external/mcp-client · proxy" in summary


def test_the_reports_cells_left_out_are_a_table(runs: dict[str, Path], tmp_path: Path) -> None:
    """The cells a grid's expansion dropped, by reason, as rows of a table on the overview."""
    from html import escape

    dropped = json.loads((runs["default"] / "manifest.json").read_text())["dropped"]
    assert dropped
    done = limbo("report", str(runs["default"]), "--out", str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    table = page.split("<table class='counts dropped'>")[1].split("</table>")[0]
    for reason, cells in dropped.items():
        assert (f"<tr><th scope='row'>{escape(reason)}</th><td class='num'>{cells}</td></tr>"
                in table)
    assert "Cells left out: {" not in page
