"""docs/analysis.md, "Uncertainty": the worked example's Python prints exactly the rows the page
shows from the page's own runs, and the coverage figures it quotes are what the seeded
benchmark (benchmarks/bench_coverage.py) prints (its `limbo compare` excerpts are checked with
the page's commands, test_analysis_docs)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.benchmarks import load

from limbo.analysis import stats

DOC = Path(__file__).resolve().parents[1] / "docs" / "analysis.md"
BIN = Path(sys.executable).parent


def section() -> str:
    text = DOC.read_text()
    return text.split("## Uncertainty")[1].split("\n## ")[0]


def excerpt(name: str) -> list[str]:
    body = section().split(f"<!-- {name}:begin -->")[1].split(f"<!-- {name}:end -->")[0]
    return [line for line in body.strip().splitlines()
            if line.startswith("|") and not line.startswith("| ---")]


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def test_the_worked_example_prints_what_the_page_shows(tmp_path: Path, capsys,
                                                       monkeypatch) -> None:
    """The runs it reads are the page's own (its first block: the e6 runs into runs/blind)."""
    (commands,) = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)[:1]
    runs = [line for line in commands.splitlines() if line.startswith("limbo run e6")]
    assert any("--out runs/blind" in line for line in runs)
    for line in runs:
        args = shlex.split(line)
        done = subprocess.run([str(BIN / "limbo"), *args[1:], "--quiet"], capture_output=True,
                              text=True, cwd=tmp_path, timeout=600, env={**os.environ})
        assert done.returncode == 0, (line, done.stderr)
    (example,) = re.findall(r"```python\n(.*?)```", section(), re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(DOC), "exec"), {"__name__": "doc_example"})  # our own docs
    printed = capsys.readouterr().out.splitlines()
    shown = [row for row in excerpt("clustered") if not row.startswith(("| family", "| cluster"))]
    assert printed == shown


@pytest.mark.parametrize(("worlds", "icc"), [(16, 0.3), (6, 0.5)])
def test_the_coverage_rows_are_the_benchmarks(worlds: int, icc: float) -> None:
    """Two rows of the page's coverage table — the issue's 16 worlds at ρ 0.3, and the least
    informative design, 6 worlds at ρ 0.5 — recomputed by the benchmark from their seeds."""
    line, found = load("bench_coverage").row("20", worlds, icc, 4000)
    assert line in excerpt("coverage")
    assert all(now[0] >= 0.93 for now, _ in found)


def test_the_coverage_table_keeps_its_promise_and_says_its_lowest() -> None:
    """Every cell of the page's table covers ≥ 93% (it says 95.0% at the least), and the
    designs table's first line quotes the table's own lowest figures."""
    rows = excerpt("coverage")[1:]
    assert len(rows) == 12
    cells = [cell.split(" (") for row in rows for cell in row.split(" | ")[2:6]]
    now, before = ([float(c[k].strip(" )|")) for c in cells] for k in (0, 1))
    assert min(now) >= 93.0
    first = excerpt("designs")[1].split(" | ")
    assert (first[1], first[2]) == (f"{min(now):.1f}%", f"{min(before):.1f}%")


def test_counting_every_episode_as_independent_is_the_simulation() -> None:
    hits, m = load("bench_coverage").simulate("20", 30, 0.3, 0.3, 4000)
    n = m.sum(axis=1)
    covered = sum(lo <= 0.3 <= hi for lo, hi in (stats.wilson(float(k), float(size))
                                                 for k, size in zip(hits.sum(axis=1), n,
                                                                    strict=True)))
    quoted = section().split("<!-- independent:begin -->")[1].split("<!-- independent:end -->")[0]
    assert quoted == pct(covered / len(n))
