"""A stored run guards the records: a restructure, a rename or a speed-up must not change them.

``tests/fixtures/release_run/`` holds two small grids (``builtin.toml``: every fault mode, both
contracts, a prompt condition and the guard over three reference policies on the built-in
services; ``world.toml``: the example shop world under every fault mode) and, for each, the
records one release wrote (``NAME/episodes.jsonl.gz``: each line as written, without its
``runtime``, sorted) and the part of its manifest that is a function of the grid
(``NAME/manifest.json``: no host, time, commit or path).

Two promises are checked: the same cells run today write the same bytes apart from ``runtime``
(the comparison is of the text as written, :func:`same_records.stripped`); and the stored
records, a previous release's, still load through the analysis loader with every episode,
experiment and fault family in place.

Only a deliberate change of what a cell records may rewrite the fixture, in the commit that
makes the change and says why::

    .venv/bin/python tests/test_release_records.py --write
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "release_run"
GRIDS = {"builtin": 300, "world": 98}
"""Each stored grid and its episode count."""
MACHINE = ("git_commit", "git_dirty", "git_source", "argv", "started_at", "resumed_at",
           "ended_at", "host", "python", "platform")
"""Manifest fields that say where and when a run was made, not what it holds."""

sys.path.insert(0, str(ROOT / "tools"))
from same_records import stripped  # noqa: E402


def run_grid(name: str, out: Path) -> None:
    """Run one stored grid into ``out`` with the installed ``limbo``, from the checkout's root
    by a relative path: a world file's path enters the grid's digest as the grid names it, so
    the manifest must not depend on where the checkout lives."""
    limbo = str(Path(sys.executable).parent / "limbo")
    grid = (FIXTURE / f"{name}.toml").relative_to(ROOT)
    done = subprocess.run([limbo, "run", str(grid), "--out", str(out), "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def stable_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest without the fields that depend on the machine, the time or the
    checkout's path."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    for name in MACHINE:
        manifest.pop(name, None)
    for world in manifest.get("worlds", []):
        world.pop("path", None)
    return dict(manifest)


def stored_lines(name: str) -> list[bytes]:
    return gzip.decompress((FIXTURE / name / "episodes.jsonl.gz").read_bytes()).splitlines()


def stored_manifest(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURE / name / "manifest.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_the_stored_cells_record_the_same_bytes_apart_from_runtime(tmp_path: Path,
                                                                    name: str) -> None:
    run_grid(name, tmp_path / name)
    today, stored = stripped(tmp_path / name), stored_lines(name)
    assert len(stored) == GRIDS[name]
    assert today == stored
    assert stable_manifest(tmp_path / name) == stored_manifest(name)


def unpack(tmp_path: Path) -> list[Path]:
    """The stored runs as run directories (records without ``runtime``, as stored)."""
    dirs = []
    for name in sorted(GRIDS):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "episodes.jsonl").write_bytes(b"".join(line + b"\n"
                                                         for line in stored_lines(name)))
        (folder / "manifest.json").write_text(json.dumps(stored_manifest(name)),
                                              encoding="utf-8")
        dirs.append(folder)
    return dirs


def test_the_previous_release_records_load_through_the_analysis_loader(tmp_path: Path) -> None:
    from limbo.analysis.loader import load

    loaded = load(unpack(tmp_path))
    frame = loaded.frame
    assert loaded.messages() == []
    assert len(frame) == sum(GRIDS.values())
    assert frame["exp:builtin"].sum() == GRIDS["builtin"]
    # A world grid's recorded design names no service, template or focal write today, so its
    # episodes belong to no experiment; the rows themselves load.
    assert frame["service"].isin(["shop", "notify"]).sum() == GRIDS["world"]
    raw = [json.loads(line) for name in sorted(GRIDS) for line in stored_lines(name)]
    # Counted from the text, independently of the loader: the duplicates, the faults' spread.
    by_id = {r["episode_id"]: r for r in raw}
    assert sorted(frame["episode_id"]) == sorted(by_id)
    assert int(frame["duplicate"].sum()) == sum(r["outcome"]["duplicate"] for r in raw)
    assert Counter(frame["fault"].astype(str)) == Counter(r["cell"]["fault"] for r in raw)
    families = dict(zip(frame["fault"].astype(str), frame["family"].astype(str), strict=True))
    assert families["timeout_late"] == "late commit"
    assert families["phantom_success"] == "phantom"
    assert "unknown" not in set(families.values())


def write() -> None:
    """Rewrite the fixture from the grids as this checkout runs them."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(GRIDS):
            run_grid(name, Path(tmp) / name)
            (FIXTURE / name).mkdir(exist_ok=True)
            body = b"".join(line + b"\n" for line in stripped(Path(tmp) / name))
            (FIXTURE / name / "episodes.jsonl.gz").write_bytes(gzip.compress(body, mtime=0))
            text = json.dumps(stable_manifest(Path(tmp) / name), indent=1, sort_keys=True)
            (FIXTURE / name / "manifest.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_release_records.py --write")
    write()
