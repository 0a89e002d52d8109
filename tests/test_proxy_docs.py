"""docs/proxy.md is true: its server, world file and agent are written out as they stand, its
commands run with the exit codes they state, and its figures and flags are the code's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from support.docpage import commands, files

from limbo.proxy.plan import modes as modes_of_proxy
from limbo.sim.catalog import catalog
from limbo.sim.tools import KEY_FIELD

DOC = Path(__file__).resolve().parents[1] / "docs" / "proxy.md"
TEXT = DOC.read_text(encoding="utf-8")




def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    for name, body in files(TEXT).items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    assert sorted(files(TEXT)) == ["agent.py", "payments.toml", "server.py"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    found = commands(TEXT)
    assert len(found) == 5
    for command, code in found:
        done = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == code, (command, done.stdout, done.stderr)
    blind = (tmp_path / "runs" / "blind" / "episodes.jsonl").read_text()
    assert '"duplicate": true' in blind and '"overclaim": true' in blind
    assert '"attempt": "reissue-1"' in blind
    keyed = (tmp_path / "runs" / "keyed" / "episodes.jsonl").read_text()
    assert '"exactly_once": true' in keyed and '"replayed": 1' in keyed


def test_the_fault_table_lists_every_mode_the_proxy_applies() -> None:
    table = TEXT.split("| mode | the agent hears | the upstream |", 1)[1].split("\n\n", 1)[0]
    modes = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert set(modes) == set(modes_of_proxy()) == set(catalog())  # the twelve, and the control


def test_the_flags_shown_are_the_command_s_and_its_help_lists_the_modes() -> None:
    usage = TEXT.split("```\nlimbo proxy", 1)[1].split("```", 1)[0]
    shown = set(re.findall(r"--[a-z-]+", usage))
    done = subprocess.run([str(Path(sys.executable).parent / "limbo"), "proxy", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert shown == set(re.findall(r"--[a-z-]+", done.stdout)) - {"--help"}
    listed = done.stdout.split("fault modes", 1)[1]
    assert re.findall(r"\b[a-z0-9_]+\b", listed.split("):", 1)[1]) == list(modes_of_proxy())


def test_the_key_argument_named_is_the_one_the_proxy_reads() -> None:
    assert f"The key argument is named `{KEY_FIELD}`" in TEXT
