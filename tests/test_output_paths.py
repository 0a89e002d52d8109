"""No command writes over a run's records. Every output path is checked after ``..`` and
symbolic links are resolved: it may not be (or lie inside) a file a run directory keeps, and an
output directory of tables, figures or a report may not be a run directory. ``limbo mcp``
records into a directory of its own kind. Each refusal is one line, exit 2, and the run's files
are byte for byte what they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.hostile import cli, refused

GRID = ["--template", "charge_invoice", "--fault", "none", "--contract", "native", "--quiet"]


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file()}


@pytest.fixture
def run(capsys, tmp_path: Path, monkeypatch) -> Path:
    """A grid's run directory, and a working directory beside it with nothing named ``x``."""
    run = tmp_path / "run"
    assert cli(capsys, "run", *GRID, "--out", str(run)).code == 0
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return run


def _refused_and_untouched(capsys, run: Path, needle: str, *args: str) -> str:
    before = snapshot(run)
    line = refused(cli(capsys, *args), needle)
    assert snapshot(run) == before
    assert not Path("x").exists()  # nothing was created on the way either
    return line


INTO = "x/../../run/episodes.jsonl"  # from work/, through a folder that does not exist (yet)


def test_report_out_that_resolves_to_the_records_is_refused(capsys, run: Path) -> None:
    """Must-show 3: the report would have renamed episodes.jsonl away."""
    line = _refused_and_untouched(capsys, run, "which is the run directory", "report", str(run),
                                  "--out", INTO)
    assert str(run / "episodes.jsonl") in line


def test_report_out_that_is_the_run_directory_is_refused(capsys, run: Path) -> None:
    _refused_and_untouched(capsys, run, "a run directory", "report", str(run), "--out", str(run))


def test_mcp_out_on_a_grids_run_is_refused(capsys, run: Path) -> None:
    """Must-show 3: it replaced the grid's manifest, and status then counted 13 of 12."""
    _refused_and_untouched(capsys, run, "holds the run of grid 'default'", "mcp", "--out",
                           str(run))
    assert cli(capsys, "status", str(run)).code == 0


@pytest.mark.parametrize("command", ["tables", "figures"])
def test_tables_and_figures_out_on_a_run_are_refused(capsys, run: Path, command: str) -> None:
    _refused_and_untouched(capsys, run, "a run directory", command, str(run), "--out", str(run))
    _refused_and_untouched(capsys, run, "which is the run directory", command, str(run),
                           "--out", "x/../../run/manifest.json")


def test_a_symbolic_link_into_the_records_is_refused(capsys, run: Path) -> None:
    os.symlink(run / "episodes.jsonl", "link")
    _refused_and_untouched(capsys, run, "which is the run directory", "figures", str(run),
                           "--out", "link")
    os.symlink(run, "dirlink")
    _refused_and_untouched(capsys, run, "a run directory", "tables", str(run), "--out",
                           "dirlink")


def test_junit_files_cannot_land_on_a_run(capsys, run: Path) -> None:
    _refused_and_untouched(capsys, run, "which is the run directory", "check", str(run),
                           "--max-dup", "1", "--junit", INTO)
    _refused_and_untouched(capsys, run, "which is the run directory", "run", *GRID, "--out",
                           "elsewhere", "--max-dup", "1", "--junit", "x/../../run/manifest.json")
    assert not Path("elsewhere").exists()


def test_run_out_and_cache_dir_cannot_land_on_a_runs_files(capsys, run: Path) -> None:
    _refused_and_untouched(capsys, run, "which is the run directory", "run", *GRID, "--out",
                           INTO)
    _refused_and_untouched(capsys, run, "a run directory", "run", *GRID, "--out", "elsewhere",
                           "--cache-dir", str(run))


def test_a_grid_run_into_an_mcp_directory_is_refused(capsys, tmp_path: Path, run: Path) -> None:
    mcp = tmp_path / "mcp"
    mcp.mkdir()
    (mcp / "manifest.json").write_text('{"kind": "mcp", "command": "limbo mcp"}\n')
    (mcp / "episodes.jsonl").write_text("")
    before = snapshot(mcp)
    refused(cli(capsys, "run", *GRID, "--out", str(mcp)), "holds episodes of `limbo mcp`")
    assert snapshot(mcp) == before


@pytest.mark.parametrize("command", ["tables", "figures", "report"])
def test_an_output_under_a_file_is_one_line(capsys, run: Path, command: str) -> None:
    Path("afile").write_text("x")
    refused(cli(capsys, command, str(run), "--out", "afile/sub"), "is a file")


@pytest.mark.parametrize("command", ["tables", "figures", "report"])
def test_an_output_the_system_refuses_is_one_line(capsys, run: Path, command: str) -> None:
    """/proc takes no new folder, even from root: the failure is a usage error, not a
    traceback."""
    only = ["--table", "3"] if command == "tables" else []
    result = cli(capsys, command, str(run), *only, "--out", "/proc/limbo-output")
    refused(result, "/proc/limbo-output")
