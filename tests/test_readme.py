"""The README's adapter example is complete: extracted as is, loaded with --plugin from a file
outside the repo, it drives a grid through the real CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def adapter_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Add a model adapter", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_example_is_under_forty_lines() -> None:
    assert len(adapter_example().strip().splitlines()) < 40


def test_the_readme_adapter_runs_a_grid_through_the_cli(tmp_path: Path) -> None:
    plugin = tmp_path / "naive_adapter.py"
    plugin.write_text(adapter_example())
    limbo = str(Path(sys.executable).parent / "limbo")
    out = tmp_path / "runs"
    result = subprocess.run([limbo, "run", "--model", "naive/v1", "--plugin", str(plugin),
                             "--out", str(out), "--quiet", "--template", "charge_invoice",
                             "--fault", "none"], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert records and all(r["cell"]["model"] == "naive/v1" for r in records)
    assert all(r["outcome"]["exactly_once"] for r in records)
    assert all(r["outcome"]["input_tokens"] > 0 for r in records)


def tour_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("limbo ")]


def test_every_limbo_command_in_the_readme_runs(tmp_path: Path) -> None:
    import os
    import shlex

    commands = tour_commands()
    assert len(commands) >= 8
    bindir = Path(sys.executable).parent
    env = {**os.environ, "OPENAI_API_KEY": "sk-readme-test", "ANTHROPIC_API_KEY": "sk-readme",
           "LIMBO_CACHE_DIR": str(tmp_path / "cache")}
    (tmp_path / "naive_adapter.py").write_text(adapter_example())
    for command in commands:
        if "<EPISODE_ID>" in command:
            first = (tmp_path / "runs/demo/episodes.jsonl").open().readline()
            command = command.replace("<EPISODE_ID>", json.loads(first)["episode_id"])
        argv = shlex.split(command)
        argv[0] = str(bindir / "limbo")
        result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, (command, result.stderr)
