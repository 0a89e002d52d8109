"""docs/scale.md is true: its local commands run as written and do what the page says; its Ray
commands use flags that exist (``ray start --help``, ``limbo run``'s parser) and the extra it
names; the cluster behaviour it describes is what tests/test_ray_executor.py runs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.hostile import LIMBO

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "scale.md"


def commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_local_commands_run_and_do_what_the_page_says(tmp_path: Path) -> None:
    local = [c for c in commands() if c.startswith("limbo ") and "--executor ray" not in c]
    assert len(local) == 3
    outs = []
    for command in local:
        done = subprocess.run([LIMBO, *shlex.split(command)[1:]], capture_output=True,
                              text=True, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (command, done.stderr)
        outs.append(done.stdout)
    assert re.search(r"ran [1-9]\d* episodes, 0 already done", outs[0])
    assert re.search(r"ran 0 episodes, [1-9]\d* already done", outs[1])  # the same directory
    laptop, machine = (tmp_path / "runs" / n / "episodes.jsonl" for n in ("scale-laptop",
                                                                         "scale-machine"))

    def ids(path: Path) -> list[str]:
        return sorted(json.loads(line)["episode_id"] for line in path.read_text().splitlines())

    assert ids(laptop) == ids(machine) and len(set(ids(laptop))) == len(ids(laptop))


def test_the_ray_commands_use_flags_that_exist() -> None:
    pytest.importorskip("ray")
    from limbo.cli import parser

    found = commands()
    starts = [c for c in found if c.startswith("ray start")]
    assert len(starts) == 2
    helps = subprocess.run([str(Path(sys.executable).parent / "ray"), "start", "--help"],
                           capture_output=True, text=True, timeout=120).stdout
    for command in starts:
        for flag in re.findall(r"(--[a-z-]+)", command):
            assert re.search(rf"{flag}\b", helps), flag
    (run,) = [c for c in found if "--executor ray" in c]
    args = parser().parse_args(shlex.split(run)[1:])
    assert (args.executor, args.ray_address) == ("ray", "10.0.0.1:6379")
    (pip,) = [c for c in found if c.startswith("pip install")]
    extra = re.search(r"limbo-bench\[(\w+)\]", pip)
    assert extra is not None
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras[extra.group(1)][0].startswith("ray[default]")


def test_the_readme_links_the_page() -> None:
    assert "[docs/scale.md](docs/scale.md)" in (ROOT / "README.md").read_text()
