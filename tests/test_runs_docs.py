"""docs/runs.md is true: its commands run as written, and what it says about the layout and
the status check holds for the run they make."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from support.hostile import LIMBO

DOC = Path(__file__).resolve().parents[1] / "docs" / "runs.md"


def commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_commands_of_the_runs_page_run(tmp_path: Path) -> None:
    found = commands()
    assert len(found) == 3 and all(c.startswith("limbo ") for c in found)
    for command in found:
        argv = shlex.split(command)
        result = subprocess.run([LIMBO, *argv[1:]], capture_output=True, text=True,
                                cwd=tmp_path, timeout=600)
        assert result.returncode == 0, (command, result.stderr)
    run = tmp_path / "runs" / "doc"
    assert sorted(p.name for p in run.iterdir()) == [".writers.lock", "episodes.jsonl",
                                                     "manifest.json"]
    status = subprocess.run([LIMBO, "status", str(run)], capture_output=True, text=True)
    assert "verdict: OK — every cell of the grid is recorded exactly once" in status.stdout


def test_the_layout_names_only_record_files_episodes_star_jsonl() -> None:
    layout = DOC.read_text().split("```text", 1)[1].split("```", 1)[0]
    names = re.findall(r"^\s+(\S+)", layout, re.M)
    records = [n for n in names if Path(n).match("episodes*.jsonl")]
    assert records == ["episodes.jsonl", "episodes.shard-2-of-3.jsonl"]
