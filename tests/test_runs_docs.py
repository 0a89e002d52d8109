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


def _text_block(containing: str) -> list[str]:
    blocks = re.findall(r"```text\n(.*?)```", DOC.read_text(), re.S)
    return next(b for b in blocks if containing in b).strip().splitlines()


def test_the_errors_by_reason_example_is_what_the_run_prints(tmp_path: Path) -> None:
    """The example's own command, against a local server answering every call with 500."""
    from support.bad_server import BadServer, Reply

    shown = _text_block("by reason:")
    boom = Reply(500, b'{"error": {"message": "upstream exploded", "type": "server_error"}}')
    with BadServer(boom) as server:
        port = server.url.split(":")[2].split("/")[0]
        command = shlex.split(shown[-1].split("once the cause is fixed: ")[1])[:-1]
        command = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in command]
        result = subprocess.run([LIMBO, *command[1:]], capture_output=True, text=True,
                                cwd=tmp_path, timeout=600)
    assert result.returncode == 1, result.stderr
    printed = result.stdout.strip().splitlines()[-len(shown):]
    assert printed == [line.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for line in shown]


def test_the_stopped_early_example_is_what_the_run_prints(tmp_path: Path) -> None:
    """The same command without ``--error-streak 0``: the last line printed is the example."""
    from support.bad_server import BadServer, Reply

    shown = _text_block("stopped early: ")[0]
    boom = Reply(500, b'{"error": {"message": "upstream exploded", "type": "server_error"}}')
    with BadServer(boom) as server:
        port = server.url.split(":")[2].split("/")[0]
        command = shlex.split(shown.split("once the cause is fixed: ")[1])[:-1]
        command = [a.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for a in command]
        result = subprocess.run([LIMBO, *command[1:]], capture_output=True, text=True,
                                cwd=tmp_path, timeout=600)
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip().splitlines()[-1] == shown.replace("127.0.0.1:8000",
                                                                   f"127.0.0.1:{port}")


def test_the_plan_line_example_is_what_a_dry_run_of_the_paper_grid_prints() -> None:
    from limbo.episode.harness import availability

    harnesses = ("claude-code", "codex", "copilot", "hermes")
    if not all(availability(h)[0] for h in harnesses):
        import pytest

        pytest.skip("the production harnesses are not installed here (make harnesses)")
    shown = _text_block("plan: ")
    result = subprocess.run([LIMBO, "run", "paper", "--dry-run"], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == shown[0]
