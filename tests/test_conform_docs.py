"""docs/conform.md is true: its server and probe are written out as they stand, its commands run
with the exit codes they state and print the verdicts it shows, and its flags, properties and CI
recipe are the command's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from support.docpage import commands, files

from limbo.proxy.conform.checks import PROPERTIES

DOC = Path(__file__).resolve().parents[1] / "docs" / "conform.md"
TEXT = DOC.read_text(encoding="utf-8")
LIMBO = str(Path(sys.executable).parent / "limbo")




def columns(table: str) -> list[tuple[str, ...]]:
    """A printed table's tool, property, verdict and effects columns."""
    row = re.compile(r"^(\S+) +(\d) (\w+) +(pass|FAIL|unknown|planned) +(\d*) ")
    return [m.groups() for line in table.splitlines() if (m := row.match(line))]


def test_the_worked_example_runs_as_printed(tmp_path: Path) -> None:
    for name, body in files(TEXT).items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    assert sorted(files(TEXT)) == ["probe.py", "server.py"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    found = commands(TEXT)
    assert len(found) == 2
    printed = []
    for command, code in found:
        done = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == code, (command, done.stdout, done.stderr)
        printed.append(done.stdout)
    shown = TEXT.split("<!-- output: runs/conform -->\n```\n", 1)[1].split("```", 1)[0]
    assert columns(printed[0]) == columns(shown) and len(columns(shown)) == 8
    assert "--tool create_charge --property 5" in printed[0]
    assert columns(printed[1]) == [("create_charge", "5", "restart", "FAIL", "2")]


def test_the_flags_shown_are_the_command_s() -> None:
    usage = TEXT.split("```\nlimbo conform", 1)[1].split("```", 1)[0]
    done = subprocess.run([LIMBO, "conform", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert set(re.findall(r"--[a-z-]+", usage)) == set(
        re.findall(r"--[a-z-]+", done.stdout)) - {"--help"}
    ci = TEXT.split("```yaml", 1)[1].split("```", 1)[0]
    assert set(re.findall(r" (--[a-z-]+)", ci)) <= set(re.findall(r"--[a-z-]+", done.stdout))


def test_the_property_table_is_the_code_s() -> None:
    rows = re.findall(r"^\| (\d) \| `(\w+)` \|", TEXT, re.M)
    assert [(int(n), name) for n, name in rows] == [(p.number, p.name)
                                                   for p in PROPERTIES.values()]
