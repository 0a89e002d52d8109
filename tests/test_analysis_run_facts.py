"""What the loader reads of a run's identity from its manifest — its world files, how much of
its grid it holds, what the command line replaced — on the release fixtures (runs written by
an earlier LIMBO, kept as they were), and on manifests a hand or a bug made odd: nothing in
them stops a table, and what cannot be read is taken as the built-in world."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from limbo.analysis.data import Data
from limbo.analysis.loader import load
from limbo.analysis.tables import TABLES

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "release_run"
RECORDS = "episodes.jsonl.gz"


def copy(name: str, tmp_path: Path, **changes: object) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURES / name, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(changes)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out / RECORDS


def test_a_world_file_run_is_known_by_its_world_and_in_no_paper_table(tmp_path: Path) -> None:
    loaded = load([FIXTURES / "builtin" / RECORDS, FIXTURES / "world" / RECORDS])
    frame = loaded.frame
    worlds = dict(frame.groupby("world", observed=True).size())
    assert set(worlds) == {"built-in", "shop@bdec61e25ce2"}
    assert worlds["shop@bdec61e25ce2"] == 98
    summary = TABLES[0](Data(loaded))
    assert {row[2].shown for row in summary.rows} == {"built-in", "shop@bdec61e25ce2"}
    assert any("world file shop@bdec61e25ce2" in line for line in summary.sources)


@pytest.mark.parametrize("odd", [
    {"worlds": "shop"}, {"worlds": [None, 3, {"identity": 7}]}, {"world": ["a"]},
    {"grid_cells": "many", "status": {"x": 1}}, {"grid": {"overrides": [1, 2]}},
    {"grid": "e1", "kind": 5},
])
def test_odd_manifest_facts_are_read_as_nothing(tmp_path: Path, odd: dict) -> None:
    run = copy("world", tmp_path, **odd)
    loaded = load([run])
    assert set(loaded.frame["world"].astype(str)) <= {"built-in", "shop@bdec61e25ce2"}
    data = Data(loaded)
    for number in (0, 3):
        table = TABLES[number](data)
        assert table.markdown() and table.csv()


def test_a_run_short_of_its_grid_says_how_short(tmp_path: Path) -> None:
    run = copy("builtin", tmp_path, grid_cells=10_000, status="stopped",
               stop_reason="--max-cost 1.0 would be exceeded by the next episode")
    loaded = load([run])
    held = len(loaded.frame)
    (line,) = loaded.notes()
    assert f"holds {held:,} of 10,000 episodes; stopped: --max-cost 1.0" in line
    table = TABLES[0](Data(loaded))
    assert any(f"({held:,} of 10,000 episodes; stopped" in s for s in table.sources)


def test_records_without_a_manifest_are_a_run_of_records(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(FIXTURES / "builtin" / RECORDS, loose / RECORDS)
    loaded = load([loose / RECORDS])
    assert set(loaded.frame["source"].astype(str)) == {"records"}
    assert set(loaded.frame["world"].astype(str)) == {"built-in"}
    assert TABLES[0](Data(loaded)).rows
