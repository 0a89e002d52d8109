"""The one loader: what it reads, what it refuses to mix in, and that the fast path and the
full parse agree."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from support.cells import cell_for

from limbo.analysis.loader import load, record_files
from limbo.base.errors import UsageError
from limbo.commands.common import builtin_design
from limbo.episode.run_one import run_episode
from limbo.log.reader import READABLE
from limbo.log.store import dumps


@pytest.fixture(scope="module")
def records() -> list[dict]:
    cells = [cell_for("charge_invoice", fault=f, model=m)
             for f in ("none", "timeout_post", "timeout_pre")
             for m in ("policy/verify", "policy/blind")]
    return [run_episode(c) for c in cells]


def write(path: Path, lines: list[str | bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else line.encode())
    return path


def test_rows_carry_cell_outcome_class_family_and_usage(tmp_path: Path, records: list) -> None:
    write(tmp_path / "run" / "episodes.jsonl", [dumps(r) + "\n" for r in records])
    frame = load([tmp_path / "run"], builtin_design).frame  # no manifest: the command's design
    assert len(frame) == len(records)
    row = frame.set_index("episode_id").loc[records[2]["episode_id"]]
    record = records[2]
    for name in ("model", "fault", "template", "focal_write", "seed"):
        assert row[name] == record["cell"][name]
    assert bool(row["duplicate"]) == record["outcome"]["duplicate"]
    assert row["tool_calls"] == record["outcome"]["tool_calls"]
    assert row["read_path"] == record["outcome"]["focal_write_class"]["read_path"]
    assert row["family"] == "read-back resolves" and row["group"] == "timeout"
    assert row["contract_class"] == "keyed"


def test_fast_path_and_full_parse_agree(tmp_path: Path, records: list) -> None:
    """A writer with other separators or key order takes the full parse; same rows."""
    write(tmp_path / "a" / "episodes.jsonl", [dumps(r) + "\n" for r in records])
    reordered = [json.dumps(dict(reversed(list(r.items())))) + "\n" for r in records]
    write(tmp_path / "b" / "episodes.jsonl", reordered)
    a = load([tmp_path / "a"]).frame.drop(columns=["file", "offset", "length"])
    b = load([tmp_path / "b"]).frame.drop(columns=["file", "offset", "length"])
    assert a.equals(b)


def test_a_bad_line_is_reported_and_the_rest_loaded(tmp_path: Path, records: list) -> None:
    lines = [dumps(r) + "\n" for r in records]
    lines.insert(2, "{not json\n")
    lines.insert(4, b"\xff\xfe garbage\n")
    lines.insert(5, "[1, 2, 3]\n")
    lines.append(dumps(records[0])[:100])  # a torn last line
    loaded = load([write(tmp_path / "episodes.jsonl", lines)])
    assert len(loaded.frame) == len(records)
    bad = [p for p in loaded.problems if p.kind == "unparseable"]
    assert [p.where.rsplit(":", 1)[1] for p in bad] == ["3", "5", "6", str(len(lines))]
    assert "torn" in bad[-1].detail
    assert any("4 unparseable" in m for m in loaded.messages())


def test_a_line_cut_after_the_outcome_is_not_a_record(tmp_path: Path, records: list) -> None:
    """Cell and outcome decode, but the record is incomplete: the fast path does not take it."""
    text = dumps(records[0])
    cut = text[:text.index('"report": ')] + "\n"
    crlf = dumps(records[1]) + "\r\n"
    loaded = load([write(tmp_path / "episodes.jsonl", [cut, crlf])])
    assert list(loaded.frame["episode_id"]) == [records[1]["episode_id"]]
    assert loaded.problems[0].kind == "unparseable" and loaded.problems[0].where.endswith(":1")


def test_a_record_missing_a_field_is_unparseable_not_a_crash(tmp_path: Path, records) -> None:
    broken = json.loads(dumps(records[0]))
    del broken["outcome"]["duplicate"]
    loaded = load([write(tmp_path / "episodes.jsonl", [dumps(broken) + "\n",
                                                       dumps(records[1]) + "\n"])])
    assert len(loaded.frame) == 1
    assert loaded.problems[0].kind == "unparseable" and "duplicate" in loaded.problems[0].detail


@pytest.mark.parametrize("where,field,value", [
    ("outcome", "duplicate", "false"), ("outcome", "tool_calls", True),
    ("outcome", "agent_time_s", "12"), ("cell", "instance", "0"), ("cell", "model", None)])
def test_a_field_of_the_wrong_type_is_unparseable(tmp_path: Path, records: list, where: str,
                                                  field: str, value: object) -> None:
    broken = json.loads(dumps(records[0]))
    broken[where][field] = value
    loaded = load([write(tmp_path / "episodes.jsonl", [dumps(broken) + "\n",
                                                       dumps(records[1]) + "\n"])])
    assert list(loaded.frame["episode_id"]) == [records[1]["episode_id"]]
    assert loaded.problems[0].kind == "unparseable" and repr(field) in loaded.problems[0].detail


def test_a_fault_mode_nobody_registered_is_reported(tmp_path: Path, records: list) -> None:
    alien = json.loads(dumps(records[0]))
    alien["cell"]["fault"] = "cosmic_ray"
    alien["episode_id"] = "ep-alien"
    loaded = load([write(tmp_path / "episodes.jsonl", [dumps(alien) + "\n"])])
    assert len(loaded.frame) == 1 and loaded.frame["family"].iloc[0] == "unknown"
    assert loaded.problems[0].kind == "unregistered fault mode"
    assert "cosmic_ray" in loaded.messages()[0] and "--plugin" in loaded.messages()[0]


def test_future_schema_is_reported_not_mixed_in(tmp_path: Path, records: list) -> None:
    future = dumps(records[0]).replace('"limbo.episode/1"', '"limbo.episode/9"', 1)
    loaded = load([write(tmp_path / "episodes.jsonl", [future + "\n", dumps(records[1]) + "\n"])])
    assert list(loaded.frame["episode_id"]) == [records[1]["episode_id"]]
    assert loaded.problems[0].kind == "unknown schema"
    assert "limbo.episode/9" in loaded.problems[0].detail
    assert READABLE == ("limbo.episode/1", "limbo.episode/2")


def test_same_episode_in_two_files(tmp_path: Path, records: list) -> None:
    first = write(tmp_path / "m1" / "episodes.jsonl", [dumps(r) + "\n" for r in records])
    changed = json.loads(dumps(records[1]))
    changed["outcome"]["duplicate"] = not changed["outcome"]["duplicate"]
    changed["runtime"]["wall_s"] = 99.0
    same = json.loads(dumps(records[0]))
    same["runtime"]["wall_s"] = 42.0  # runtime may differ between two runs of one cell
    second = write(tmp_path / "m2" / "episodes.shard-1-of-2.jsonl",
                   [dumps(same) + "\n", dumps(changed) + "\n"])
    loaded = load([first.parent, second])
    ids = list(loaded.frame["episode_id"])
    assert ids.count(records[0]["episode_id"]) == 1
    assert records[1]["episode_id"] not in ids  # the two copies disagree: both dropped
    kinds = {p.kind: p for p in loaded.problems}
    assert "identical" in kinds["duplicate"].detail and str(first) in kinds["duplicate"].detail
    assert kinds["conflict"].where.endswith(":2")
    assert len(loaded.frame) == len(records) - 1


def test_only_episode_files_of_a_directory_are_read(tmp_path: Path, records: list) -> None:
    run = tmp_path / "run"
    write(run / "episodes.jsonl", [dumps(records[0]) + "\n"])
    write(run / "episodes.quarantine.jsonl", ["{broken\n"])
    write(run / "manifest.json", ["{}"])
    write(run / "notes.jsonl", [dumps(records[1]) + "\n"])
    write(run / "run.lock", [""])
    assert record_files(run) == [run / "episodes.jsonl"]
    loaded = load([run], builtin_design)
    assert len(loaded.frame) == 1 and [p.kind for p in loaded.problems] == ["no design"]


def test_empty_inputs(tmp_path: Path, records: list) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no episode records could be loaded") as err:
        load([tmp_path / "empty"])
    assert "\n" not in str(err.value)
    with pytest.raises(UsageError, match="neither a run directory nor a record file"):
        load([tmp_path / "missing"])
    full = write(tmp_path / "full" / "episodes.jsonl", [dumps(records[0]) + "\n"])
    loaded = load([tmp_path / "empty", full.parent])
    assert len(loaded.frame) == 1 and loaded.problems[0].kind == "no records"


def test_events_are_decoded_only_on_request(tmp_path: Path, records: list) -> None:
    shuffled = [dumps(r) + "\n" for r in records]
    random.Random(3).shuffle(shuffled)
    loaded = load([write(tmp_path / "episodes.jsonl", shuffled)])
    events = loaded.each_events(loaded.frame.iloc[[4, 1]], lambda _, found: list(found))
    by_id = {r["episode_id"]: r["events"] for r in records}
    for index, got in events.items():
        assert got == by_id[loaded.frame.loc[index, "episode_id"]]
