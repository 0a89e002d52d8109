"""docs/harnesses.md: its `limbo mcp` agent runs as written (an `mcp` SDK client over stdio),
its tables name every production harness with its pinned version, and the timeout sentences it
quotes are the ones the drivers recognise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from limbo.base.registry import entries

DOC = Path(__file__).resolve().parents[1] / "docs" / "harnesses.md"


def test_the_mcp_agent_example_runs(tmp_path: Path) -> None:
    source = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    (tmp_path / "agent.py").write_text(source)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "agent.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "first try: server_error" and lines[2].startswith("retry: True same key: g-")
    assert lines[-1] == "False {'charge': 1, 'comment': 0}"


def test_every_production_harness_is_in_the_table_with_its_pin() -> None:
    text = DOC.read_text()
    production = {n: c for n, c in entries("harness").items() if hasattr(c, "install")}
    assert len(production) == 4
    for name, cls in production.items():
        row = re.search(rf"^\| `{re.escape(name)}` \| `([^`]+)` ([\d.]+) \|", text, re.M)
        assert row, name
        assert (row.group(1).split("[")[0], row.group(2)) == (cls.install.package,
                                                             cls.install.version)


def test_the_quoted_timeout_sentences_are_the_ones_recognised() -> None:
    section = DOC.read_text().split("### Timeouts are real", 1)[1].split("###", 1)[0]
    for name, cls in entries("harness").items():
        if not hasattr(cls, "install"):
            continue
        row = re.search(rf"^\| `{re.escape(name)}` \| (.*) \|$", section, re.M).group(1)
        assert any(re.search(p, row.replace("`", "")) for p in cls.timeout_texts), name
