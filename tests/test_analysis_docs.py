"""docs/analysis.md: its commands and its Python example run as written, the compare excerpt
is what the command prints, and every table and figure it lists is one the code builds."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "analysis.md"
BIN = Path(sys.executable).parent


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), re.S)


def commands() -> list[str]:
    lines = [line.split("  #")[0].strip() for block in blocks("sh") for line in block.splitlines()]
    return [line for line in lines if line.startswith("limbo ")]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    cwd = tmp_path_factory.mktemp("doc")
    printed = {}
    for command in commands():
        args = shlex.split(command)
        done = subprocess.run([str(BIN / "limbo"), *args[1:]], capture_output=True, text=True,
                              cwd=cwd, timeout=600, env={**os.environ})
        assert done.returncode == 0, (command, done.stderr)
        printed[command] = done.stdout
    return cwd, printed


def test_the_commands_run_and_write_what_they_say(outputs) -> None:
    cwd, printed = outputs
    assert len(printed) >= 11
    assert sorted(p.name for p in (cwd / "tables").iterdir()) == [
        "table10.csv", "table10.md", "table10.tex", "table3.csv", "table3.md", "table3.tex"]
    for number in (2, 3, 4, 5, 6):
        assert (cwd / "figures" / f"figure{number}.png").stat().st_size > 10_000
    assert "### Table 13" in printed["limbo tables runs/e1 runs/e2 runs/e5 runs/verify"]
    assert "No data" not in printed["limbo tables runs/e1 runs/e2 runs/e5 runs/verify"].split(
        "### Table 13")[1].split("### Table 14")[0]


@pytest.mark.parametrize(("name", "command"), [
    ("compare", "limbo compare runs/verify runs/blind"),
    ("unclustered", "limbo compare runs/verify runs/blind --cluster none")])
def test_the_compare_excerpts_are_real_output(outputs, name: str, command: str) -> None:
    _, printed = outputs
    excerpt = DOC.read_text().split(f"<!-- {name}:begin -->")[1].split(f"<!-- {name}:end -->")[0]
    rows = [line for line in excerpt.strip().splitlines() if line.startswith("|")]
    assert len(rows) >= 1
    for row in rows:
        assert row in printed[command].splitlines()


def test_the_clustered_p_is_primary_in_the_docs_example(outputs) -> None:
    """Must-show 3: on the docs' example `limbo compare` leads with the clustered p (≈ 0.03,
    six worlds all one way) and keeps the unclustered McNemar p beside it."""
    _, printed = outputs
    lines = printed["limbo compare runs/verify runs/blind"].splitlines()
    header = next(line for line in lines if line.startswith("| family |")).split(" | ")
    row = next(line for line in lines if line.startswith("| read-back resolves | dup |"))
    cells = dict(zip(header, row.split(" | "), strict=True))
    assert header.index("sign-flip p") < header.index("McNemar p (unclustered)")
    assert (cells["clusters"], cells["sign-flip p"]) == ("6", "0.031")
    assert float(cells["McNemar p (unclustered)"]) < 1e-15


def test_the_python_example_runs(outputs, capsys, monkeypatch) -> None:
    cwd, _ = outputs
    monkeypatch.chdir(cwd)
    example = blocks("python")[0]  # the Statistics example ("Uncertainty" has its own test)
    exec(compile(example, str(DOC), "exec"), {"__name__": "doc_example"})  # our own docs
    out = capsys.readouterr().out
    assert "### Table 3" in out and "0.03515625" in out and "\n0.5\n" in out


def test_every_table_and_figure_is_documented() -> None:
    from limbo.analysis.figures import FIGURES
    from limbo.analysis.tables import TABLES

    tables, figures = DOC.read_text().split("## The tables")[1].split("## Figures")
    for number in TABLES:
        assert re.search(rf"^\| {number} \|", tables, re.M), number
    for number in FIGURES:
        assert re.search(rf"^\| {number} \|", figures, re.M), number
