"""The manifest says which code ran: the commit of the running package and whether its tree
was dirty — read from the source tree for a checkout (an editable install), never from the
current directory or a repository that merely encloses the package; the wheel case is in
``test_packaging.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import limbo
from limbo.cli import main

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def git(cwd: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def new_repo(path: Path) -> str:
    """A git repository at ``path`` with one commit of whatever is there; its commit."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README").write_text("another project\n")
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    return git(path, "rev-parse", "HEAD")


def test_an_editable_install_records_its_source_trees_commit_not_the_cwds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Path(limbo.__file__).resolve().is_relative_to(ROOT)  # the tests run editable
    elsewhere = new_repo(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = tmp_path / "run"
    assert main(["run", "--out", str(out), "--quiet", "--model", "policy/verify", "--fault",
                 "none", "--template", "charge_invoice"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["git_commit"] == git(ROOT, "rev-parse", "HEAD") != elsewhere
    assert manifest["git_dirty"] is bool(git(ROOT, "status", "--porcelain"))
    assert manifest["git_source"] == "checkout"


PROBE = "import json, limbo.base.provenance as p; print(json.dumps(p.provenance()))"


def probe(path: Path) -> dict[str, object]:
    """``provenance()`` of the package found first on ``path`` (a fresh interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run([sys.executable, "-P", "-c", PROBE], cwd=path, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _package_copy(into: Path) -> None:
    (into / "limbo" / "base").mkdir(parents=True)
    for name in ("__init__.py", "base/__init__.py", "base/provenance.py"):
        shutil.copy(ROOT / "limbo" / name, into / "limbo" / name)


def test_a_checkout_is_clean_then_dirty_and_untracked_files_count(tmp_path: Path) -> None:
    tree = tmp_path / "checkout"
    _package_copy(tree)
    (tree / ".gitignore").write_text("runs/\n__pycache__/\n")  # as the repository ignores them
    commit = new_repo(tree)
    assert probe(tree) == {"git_commit": commit, "git_dirty": False, "git_source": "checkout"}
    (tree / "runs").mkdir()
    (tree / "runs" / "x.jsonl").write_text("{}\n")  # ignored: still clean
    assert probe(tree)["git_dirty"] is False
    (tree / "limbo" / "plugin.py").write_text("X = 1\n")
    assert probe(tree) == {"git_commit": commit, "git_dirty": True, "git_source": "checkout"}
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "two")
    assert probe(tree) == {"git_commit": git(tree, "rev-parse", "HEAD"), "git_dirty": False,
                           "git_source": "checkout"}


def test_a_package_inside_some_other_repository_is_not_that_repositorys_commit(
        tmp_path: Path) -> None:
    outer = tmp_path / "project"
    _package_copy(outer / "venv" / "site-packages")
    new_repo(outer)
    assert probe(outer / "venv" / "site-packages") == {
        "git_commit": "unknown", "git_dirty": None, "git_source": "unknown"}


def test_a_baked_build_info_is_read_and_a_broken_one_is_unknown(tmp_path: Path) -> None:
    _package_copy(tmp_path)
    info = tmp_path / "limbo" / "_build_info.json"
    info.write_text(json.dumps({"git_commit": "abc123", "git_dirty": True}))
    assert probe(tmp_path) == {"git_commit": "abc123", "git_dirty": True, "git_source": "build"}
    for broken in ("[1,", "[]", '{"git_commit": 7}', "\udcff"):
        info.write_text(broken, errors="surrogateescape")
        assert probe(tmp_path)["git_source"] == "unknown"
