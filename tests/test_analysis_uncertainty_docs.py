"""docs/analysis.md, "Uncertainty": the worked example's Python prints exactly the rows the page
shows from the page's own runs, and the simulation figures it quotes are what the simulation
gives (its `limbo compare` excerpts are checked with the page's commands, test_analysis_docs)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.clustered_sim import coverage

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


def test_the_coverage_figures_are_the_simulation() -> None:
    found = coverage(0.3)
    assert excerpt("coverage")[1:] == [
        f"| Wilson on every episode (`none`) | {pct(found['none'])} |",
        f"| Wilson on n / deff, clustered by world | {pct(found['world'])} |"]


@pytest.mark.parametrize("row", [0, 1, 2])
def test_the_rare_outcome_figures_are_the_simulation(row: int) -> None:
    rate = (0.05, 0.10, 0.30)[row]
    estimated, known = coverage(rate)["world"], coverage(rate, known_icc=True)["world"]
    assert excerpt("rare")[1 + row] == f"| {100 * rate:.0f}% | {pct(estimated)} | {pct(known)} |"
