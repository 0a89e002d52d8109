"""The one-distribution layout: only ``limbo`` is installed, every mapped folder is packaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"services": "limbo.services", "faults": "limbo.faults", "harnesses": "limbo.harnesses",
          "experiments": "limbo.experiments", "analysis": "limbo.analysis", "limbo": "limbo"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_packages_list_matches_the_folders() -> None:
    declared = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = set()
    for folder, prefix in MAPPED.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([prefix, *rel.parts]) if rel.parts else prefix)
    assert found == declared


def test_package_dir_maps_every_folder_into_limbo() -> None:
    mapping = _pyproject()["tool"]["setuptools"]["package-dir"]
    assert mapping == {v: k for k, v in MAPPED.items() if k != "limbo"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this tree, built once for the module."""
    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(ROOT)], check=True, capture_output=True)
    (built,) = wheels.glob("*.whl")
    return built


def install(wheel: Path, target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)


def test_wheel_installs_only_limbo_and_works_outside_the_repo(wheel: Path, tmp_path: Path) -> None:
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {n for n in names if not n.endswith(".dist-info")} == {"limbo"}
    members = zipfile.ZipFile(wheel).namelist()
    assert "limbo/services/templates/billing.json" in members
    assert "limbo/harnesses/prompts/vanilla.txt" in members
    assert "limbo/experiments/grids/default.toml" in members
    assert "limbo/analysis/report/static/episode.js" in members
    target = tmp_path / "site"
    install(wheel, target)
    probe = ("import limbo, limbo.services.billing, limbo.faults;"
             "from limbo.sim.cell import Cell; from limbo.episode.run_one import run_episode;"
             "r = run_episode(Cell(service='billing', template='charge_invoice',"
             " focal_write='billing_create_charge'));"
             "print(limbo.__file__, r['outcome']['exactly_once'])")
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-P", "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(str(target)) and out.strip().endswith("True")


def test_a_wheel_records_the_commit_it_was_built_from(wheel: Path, tmp_path: Path) -> None:
    """Installed into a virtualenv inside another git repository and run from there, a wheel
    reports the commit (and dirty flag) baked in when it was built from this tree."""
    from limbo.base.provenance import git_state

    built_from = git_state(ROOT)
    assert built_from is not None  # the tests run in a checkout
    project = tmp_path / "project"
    install(wheel, project / "venv" / "site")
    env = {**os.environ, "PYTHONPATH": str(project / "venv" / "site"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "another project"]):
        subprocess.run(["git", *args], cwd=project, env=env, check=True, capture_output=True)
    probe = "import json, limbo.base.provenance as p; print(p.__file__, json.dumps(p.provenance()))"
    out = subprocess.run([sys.executable, "-P", "-c", probe], cwd=project, env=env,
                         capture_output=True, text=True, check=True).stdout
    where, found = out.split(" ", 1)
    assert where.startswith(str(project / "venv" / "site"))
    assert json.loads(found) == {**built_from, "git_source": "build"}


def test_bare_folder_imports_are_banned_by_the_linter() -> None:
    banned = _pyproject()["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    assert {"services", "faults", "harnesses", "experiments", "analysis"} <= set(banned)
    assert {"time.time", "random.random", "uuid.uuid4", "datetime.datetime.now"} <= set(banned)
    assert {"time.perf_counter", "time.perf_counter_ns", "time.time_ns", "time.monotonic_ns",
            "time.process_time", "datetime.datetime.utcnow", "datetime.datetime.today",
            "datetime.date.today", "random.randrange", "random.choices", "random.getrandbits",
            "random.Random", "random.SystemRandom", "uuid.uuid1", "os.urandom",
            "secrets.token_hex", "secrets.token_bytes", "secrets.token_urlsafe",
            "secrets.choice"} <= set(banned)
    messages = " ".join(entry["msg"] for entry in banned.values())
    assert "limbo.clock" not in messages  # no such module: time is the world's simpy env
    ignores = _pyproject()["tool"]["ruff"]["lint"]["per-file-ignores"]
    # wall clock / OS randomness is legitimate only outside the simulation (and limbo/base/rng.py
    # is where generators are built); sim code never gets an ignore
    outside_sim = {"limbo/base/rng.py", "limbo/cli.py", "limbo/base/runtime.py", "limbo/commands/*",
                   "limbo/providers/*", "limbo/gateway/*", "harnesses/guard/*", "benchmarks/*",
                   "tests/*"}
    for path, rules in ignores.items():
        if "TID251" in rules:
            assert path in outside_sim or path.startswith(("limbo/providers/", "limbo/gateway/",
                                                           "limbo/commands/")), path
