"""Shared checks of the hostile-input suite (``test_hostile_*.py``).

Every hostile case asserts the same four things: the exit code, no traceback anywhere in the
output, one clear line for an error, and the integrity of the run directory afterwards (every
line a valid record, every cell at most once — or nothing written at all). The CLI runs in this
process through :func:`limbo.cli.main`, which is fast; cases that need a real process (kill -9,
two writers, Ctrl-C, a full disk) use :func:`spawn`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from limbo.cli import main

LIMBO = str(Path(sys.executable).parent / "limbo")


class Outcome:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Outcome:
    """``limbo ARGS`` in this process; the environment is restored."""
    saved = dict(os.environ)
    capsys.readouterr()
    try:
        code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return Outcome(code, out, err)


def refused(result: Outcome, needle: str, code: int = 2) -> str:
    """The one error line of a refused command, which must contain ``needle``."""
    assert result.code == code, (result.code, result.out, result.err)
    assert len(result.lines) == 1, result.err
    line = result.lines[0]
    assert line.startswith("limbo: error: ") and needle in line, line
    return line


def spawn(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
          timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([LIMBO, *args], capture_output=True, text=True, cwd=cwd,
                            env={**os.environ, **(env or {})}, timeout=timeout)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def lines_of(run_dir: Path) -> list[bytes]:
    out = []
    for path in sorted(run_dir.glob("episodes*.jsonl")):
        out += path.read_bytes().splitlines(keepends=True)
    return out


def records(run_dir: Path, runtime: bool = False) -> list[dict[str, Any]]:
    """Every record of ``run_dir``, sorted by id; strict: a line that is not a complete, valid
    UTF-8, strict JSON record fails the test, and so does an id seen twice."""
    out = []
    for raw in lines_of(run_dir):
        assert raw.endswith(b"\n"), raw[-80:]
        record = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        assert {"schema", "episode_id", "cell", "outcome", "events"} <= set(record)
        if not runtime:
            record.pop("runtime")
        out.append(record)
    ids = [r["episode_id"] for r in out]
    assert len(ids) == len(set(ids)), "a cell was recorded twice"
    return sorted(out, key=lambda r: r["episode_id"])


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} in a record")


def untouched(path: Path) -> None:
    """Bad input wrote nothing: the run directory was not even created."""
    assert not path.exists(), sorted(p.name for p in path.iterdir())


def write_plugin(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return path
