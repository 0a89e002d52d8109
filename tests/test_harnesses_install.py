"""Where the production harnesses come from: pinned versions in a project-local directory,
found by LIMBO_HARNESS_DIR or the nearest .harnesses; a missing or mismatched one is reported
with how to install it, listed as such, and its grid cells are dropped with a counted reason;
installing again when everything is present does nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness_runs import PRODUCTION, require

from limbo.base.registry import entries, lookup
from limbo.experiments.grid import expand, load_grid
from limbo.harnesses.production.install import ENV, harness_dir, install_all, status

LIMBO = str(Path(sys.executable).parent / "limbo")


def _installs():
    return [cls.install for cls in entries("harness").values() if hasattr(cls, "install")]


def test_a_missing_harness_says_where_it_looked_and_how_to_install(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))
    for name in PRODUCTION:
        ok, detail = lookup("harness", name).availability()
        assert not ok and str(tmp_path) in detail and "make harnesses" in detail


def test_another_version_than_the_pin_is_not_used(tmp_path) -> None:
    codex = lookup("harness", "codex").install
    meta = tmp_path / "npm" / "node_modules" / codex.package / "package.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"name": codex.package, "version": "0.1.0"}))
    ok, detail = status(codex, tmp_path)
    assert not ok and "0.1.0 found" in detail and f"{codex.version} pinned" in detail


def test_the_nearest_harness_directory_is_found_from_below(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    (tmp_path / ".harnesses").mkdir()
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    assert harness_dir() == tmp_path / ".harnesses"


def test_grids_drop_cells_of_harnesses_not_installed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path))
    exp = expand(load_grid("e3"))
    assert {c.harness for c in exp.cells} == {"minimal"}
    dropped = {reason: n for reason, n in exp.dropped.items() if reason.startswith("harness")}
    assert sorted(r.split(":")[0] for r in dropped) == sorted(
        f"harness {h} is not available here" for h in PRODUCTION)
    assert all("make harnesses" in r for r in dropped)
    assert len(set(dropped.values())) == 1  # every harness has the same cells as minimal
    result = subprocess.run([LIMBO, "list", "harnesses"], capture_output=True, text=True,
                            env={**os.environ, ENV: str(tmp_path)})
    assert result.returncode == 0 and result.stdout.count("not available here:") == 4


def test_installed_harnesses_are_in_the_grid_and_not_installed_again() -> None:
    for name in PRODUCTION:
        require(name)
    cells = expand(load_grid("e3")).cells
    assert {c.harness for c in cells} == {"minimal", *PRODUCTION}
    assert install_all(_installs(), harness_dir()) == []


@pytest.mark.parametrize("name", ["codex", "copilot", "claude-code"])
def test_each_installed_cli_reports_its_pinned_version(name) -> None:
    """(hermes is left out: its --version asks PyPI whether it is up to date; its version is
    read from its distribution's metadata instead.)"""
    require(name)
    cls = lookup("harness", name)
    out = subprocess.run([str(cls.install.command(harness_dir())), "--version"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"})
    assert cls.install.version in out.stdout + out.stderr


def test_hermes_as_the_driver_starts_it_installs_nothing(tmp_path) -> None:
    """Left to itself hermes pip-installs an optional backend's packages when it first needs
    them (edge-tts at start-up, until a run has installed it), from PyPI, into the venv that
    concurrent runs share. Asked in its own code whether it may, under the driver's config and
    environment, it must say no."""
    require("hermes")
    from limbo.harnesses.production.base import Endpoints

    cls = lookup("harness", "hermes")
    home = tmp_path / "home"
    home.mkdir()
    at = Endpoints(openai="http://127.0.0.1:9/v1", anthropic="http://127.0.0.1:9",
                   mcp="http://127.0.0.1:9/mcp")
    argv, extra = cls.command(cls.__new__(cls), home, "task", at)  # needs no episode state
    python = Path(argv[0]).parent / "python"
    ask = "from tools.lazy_deps import _allow_lazy_installs as a; print(a())"
    out = subprocess.run([str(python), "-c", ask], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(home), **extra})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
