"""The linter really flags wall-clock and unseeded-random calls in sim code: a probe file is
linted as if it sat in each sim folder, with the repository's own ruff configuration, and
every banned call in it must be reported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
FOLDERS = ("services", "faults", "harnesses", "experiments", "analysis")
SIM_PATHS = ("services/probe.py", "faults/probe.py", "harnesses/probe.py",
             "harnesses/guard/probe.py", "limbo/probe.py", "limbo/sim/world.py", "limbo/sim/endpoint.py")

pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff is not installed")


def _banned_calls() -> list[str]:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())
    banned = table["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    return [name for name in banned if name not in FOLDERS]


def _probe(names: list[str]) -> str:
    """One module importing each banned name's root and using the name on its own line, plus
    from-import spellings that must be resolved too."""
    roots = sorted({n.split(".")[0] for n in names})
    lines = [f"import {r}" for r in roots]
    lines += [f"_{i} = {name}" for i, name in enumerate(names)]
    lines += ["from time import perf_counter as _pc", "from datetime import date as _d",
              "_today = _d.today()", "from random import SystemRandom"]
    return "\n".join(lines) + "\n"


def _flagged(source: str, path: str) -> list[str]:
    out = subprocess.run([str(RUFF), "check", "--config", "pyproject.toml", "--select", "TID251",
                          "--output-format", "json", "--stdin-filename", path, "-"],
                         input=source, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr
    found = []
    for diag in json.loads(out.stdout):
        match = re.match(r"`([^`]+)` is banned", diag["message"])
        assert match, diag["message"]
        found.append(match.group(1))
    return found


REVIEW_NAMED = ["time.perf_counter", "time.monotonic_ns", "datetime.date.today", "random.Random",
                "random.SystemRandom", "uuid.uuid1", "uuid.uuid4", "os.urandom",
                "secrets.token_urlsafe", "secrets.choice"]


@pytest.mark.parametrize("path", ["services/probe.py", "limbo/sim/world.py"])
def test_the_calls_a_review_named_are_flagged_in_sim_code(path: str) -> None:
    """Written out here rather than read from the configuration: whatever the banned list
    says, these calls in simulation code fail the lint."""
    found = _flagged(_probe(REVIEW_NAMED), path)
    assert sorted(set(REVIEW_NAMED) - set(found)) == []


@pytest.mark.parametrize("path", SIM_PATHS)
def test_every_banned_call_is_flagged_in_sim_code(path: str) -> None:
    names = _banned_calls()
    found = _flagged(_probe(names), path)
    assert sorted(set(names) - set(found)) == []
    assert {"time.perf_counter", "datetime.date.today", "random.SystemRandom"} <= set(found)
    assert found.count("time.perf_counter") == 2 and found.count("datetime.date.today") == 2


def test_only_limbo_rng_may_build_a_generator() -> None:
    source = "import random\nrng = random.Random(7)\n"
    assert _flagged(source, "limbo/base/rng.py") == []
    assert _flagged(source, "services/data.py") == ["random.Random"]
    assert _flagged("from limbo.base.rng import Rng\nrng: Rng\n", "faults/base.py") == []


def test_the_runtime_record_may_read_the_wall_clock_but_the_kernel_may_not() -> None:
    source = "import time\nstart = time.perf_counter()\n"
    assert _flagged(source, "limbo/base/runtime.py") == []
    assert _flagged(source, "limbo/sim/boundary.py") == ["time.perf_counter"]


def _codes(source: str, path: str) -> list[str]:
    """Rule codes the repository's own configuration reports for ``source`` at ``path``."""
    out = subprocess.run([str(RUFF), "check", "--config", "pyproject.toml", "--output-format",
                          "json", "--stdin-filename", path, "-"],
                         input=source, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode in (0, 1), out.stderr
    return [diag["code"] for diag in json.loads(out.stdout)]


def test_a_noqa_must_silence_an_enabled_rule_that_fires() -> None:
    blind = "def f(g):\n    try:\n        g()\n    except Exception:\n        return None\n"
    assert _codes(blind, "limbo/probe.py") == ["BLE001"]
    justified = blind.replace("except Exception:", "except Exception:  # noqa: BLE001 - why")
    assert _codes(justified, "limbo/probe.py") == []
    assert _codes("x = 1  # noqa: UP007\n", "limbo/probe.py") == ["RUF100"]  # not enabled
    assert _codes("x = 1  # noqa: E501\n", "limbo/probe.py") == ["RUF100"]  # nothing to silence
