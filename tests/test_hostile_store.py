"""Hostile run directories: corrupted, torn and duplicated lines, files that are not what they
should be, another grid's records, another writer holding the directory. Whatever is found,
nothing valid is lost, nothing is counted twice, and every problem is one line naming it."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from support.hostile import cli, records, refused

from limbo.log.runlock import WriterLock

GRID = ["--template", "charge_invoice", "--model", "policy/verify"]  # 48 cells


def run(capsys, out: Path, *extra: str):
    return cli(capsys, "run", *GRID, "--out", str(out), "--quiet", *extra)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[dict]:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("reference")
    assert main(["run", *GRID, "--out", str(out), "--quiet"]) == 0
    return records(out)


@pytest.fixture
def done(capsys, tmp_path: Path, reference) -> Path:
    out = tmp_path / "run"
    assert run(capsys, out).code == 0
    assert records(out) == reference
    return out


def _half(line: bytes) -> bytes:
    return line[: len(line) // 2] + b"\n"


def _edit(line: bytes, change) -> bytes:
    record = json.loads(line)
    change(record)
    return json.dumps(record, allow_nan=True).encode() + b"\n"


def _nan(record: dict) -> None:
    record["outcome"]["cost_usd"] = float("nan")


CORRUPTIONS = {
    "garbage": lambda line: b"this is not json\n",
    "truncated json": _half,
    "not utf-8": lambda line: b"\xff\xfe" + line[2:],
    "a json array": lambda line: b"[1, 2, 3]\n",
    "a json string": lambda line: b'"hello"\n',
    "no cell": lambda line: _edit(line, lambda r: r.pop("cell")),
    "no outcome": lambda line: _edit(line, lambda r: r.pop("outcome")),
    "events not a list": lambda line: _edit(line, lambda r: r.update(events="none")),
    "nan": lambda line: _edit(line, _nan),
    "another schema": lambda line: _edit(line, lambda r: r.update(schema="other/1")),
    "numeric id": lambda line: _edit(line, lambda r: r.update(episode_id=42)),
    "path as id": lambda line: _edit(line, lambda r: r.update(episode_id="../../x")),
    "empty line": lambda line: b"\n",
    "blank line": lambda line: b"   \t \n",
    "nul bytes": lambda line: b"\0" * 20 + b"\n",
    "deep nesting": lambda line: b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "two records on one line": lambda line: line[:-1] + line,
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_corrupted_line_in_the_middle_is_quarantined_and_its_cell_runs_again(
        capsys, done: Path, reference, kind: str) -> None:
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    bad = CORRUPTIONS[kind](lines[middle])
    path.write_bytes(b"".join([*lines[:middle], bad, *lines[middle + 1:]]))
    again = run(capsys, done)
    assert again.code == 0, again.err
    assert f"quarantined episodes.jsonl line {middle + 1}: " in again.out
    assert "its cell runs again" in again.out and "ran 1 episode, 47 already done" in again.out
    assert records(done) == reference  # the cell ran again; no other record was lost
    entries = [json.loads(x) for x in (done / "quarantine.jsonl").read_text().splitlines()]
    assert len(entries) == 1
    assert (entries[0]["file"], entries[0]["line"]) == ("episodes.jsonl", middle + 1)
    assert base64.b64decode(entries[0]["raw_base64"]) == bad
    assert cli(capsys, "status", str(done)).code == 0


def test_a_duplicate_line_is_quarantined_and_nothing_runs_again(capsys, done: Path,
                                                                 reference) -> None:
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:10], lines[3], *lines[10:]]))
    status = cli(capsys, "status", str(done))
    assert status.code == 1 and "episodes.jsonl line 11: duplicate of episodes.jsonl line 4" \
        in status.out
    again = run(capsys, done)
    assert "quarantined episodes.jsonl line 11: duplicate of episodes.jsonl line 4" in again.out
    assert "ran 0 episodes, 48 already done" in again.out
    assert records(done) == reference


@pytest.mark.parametrize(("change", "why"), [
    (lambda r: r["cell"].pop("fault"), "its cell has no fault text"),
    (lambda r: r["cell"].update(model=["a", "list"]), "its cell has no model text"),
    (lambda r: r["outcome"].update(duplicate="yes"), "its outcome's duplicate is not a flag"),
    (lambda r: r["outcome"].update(cost_usd="free"), "its outcome's cost_usd is not a number"),
    (lambda r: r["outcome"].pop("fault_fired"), "its outcome has no fault_fired"),
])
def test_a_resumed_runs_summary_names_a_record_it_cannot_count(capsys, done: Path, change,
                                                                 why: str) -> None:
    """A record edited (or written by another tool) that the reader still takes is counted as
    done; the summary of a resumed run leaves it out and says where it is, instead of ending
    the run in a traceback."""
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:4], _edit(lines[4], change), *lines[5:]]))
    again = run(capsys, done)
    assert again.code == 0, again.err
    assert "ran 0 episodes, 48 already done" in again.out
    assert f"1 stored record not in this summary (edited, or written by another tool): " \
           f"episodes.jsonl line 5: {why}" in again.out
    assert "│ all                │       47 │" in again.out


def _opened(out: Path, scanned, shard=None):
    """The directory as a writer takes it, handed ``scanned`` (the scan ``limbo run`` made
    before the lock, for its forecast)."""
    from limbo.run.plan import Plan
    from limbo.run.runner import RunDir

    manifest = json.loads((out / "manifest.json").read_text())
    run = RunDir(out, shard)
    run.open(Plan(manifest["fingerprint"], 48, ()), "grid", lambda text: None, (), scanned)
    run.close()
    return run.scan


def test_a_writer_reads_the_records_again_only_when_they_changed_since_its_first_scan(
        done: Path) -> None:
    """A resume scans once when nothing changed between its forecast's scan and the lock; a
    record another writer appended, a line rewritten in place, a new file or a file gone in
    between is read, so nothing is counted done that is not, or missed."""
    from limbo.log.store import scan

    path = done / "episodes.jsonl"
    whole = path.read_bytes()
    lines = whole.splitlines(keepends=True)
    first = scan(done)
    assert first.still(done) and _opened(done, first) is first
    assert _opened(done, first, shard=(1, 1)) is not first  # a shard reads other files live
    (done / "episodes.shard-1-of-1.jsonl").unlink()  # the shard's own file, made empty
    path.write_bytes(b"".join(lines[:-1]))
    short = scan(done)
    path.write_bytes(whole)  # the missing record lands before the lock is taken
    assert not short.still(done)
    again = _opened(done, short)
    assert again is not short and again.ids == first.ids
    before = scan(done)
    stamp = path.stat()
    path.write_bytes(whole.replace(b'"policy/verify"', b'"policy/verifx"', 1))  # same size
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000))
    assert path.stat().st_size == stamp.st_size and not before.still(done)
    path.write_bytes(whole)
    before = scan(done)
    (done / "episodes.shard-1-of-2.jsonl").write_bytes(lines[0])
    assert not before.still(done)
    (done / "episodes.shard-1-of-2.jsonl").unlink()
    assert before.still(done)
    path.unlink()
    assert not before.still(done)


def test_a_torn_last_line_is_repaired_and_reported(capsys, done: Path, reference) -> None:
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:100])
    again = run(capsys, done)
    assert "repaired a torn last line (100 bytes)" in again.out
    assert "ran 1 episode, 47 already done" in again.out
    assert records(done) == reference


def test_a_corrupted_line_in_another_shards_file_is_not_counted_and_is_fixed_by_its_shard(
        capsys, tmp_path: Path, reference) -> None:
    out = tmp_path / "run"
    for shard in ("1/2", "2/2"):
        assert run(capsys, out, "--shard", shard).code == 0
    other = out / "episodes.shard-2-of-2.jsonl"
    lines = other.read_bytes().splitlines(keepends=True)
    other.write_bytes(b"".join([lines[0], _half(lines[1]), *lines[2:]]))
    before = other.read_bytes()
    first = run(capsys, out, "--shard", "1/2")
    assert first.code == 0
    assert ("episodes.shard-2-of-2.jsonl line 2: not JSON" in first.out
            and "the writer of that shard will quarantine it" in first.out)
    assert other.read_bytes() == before  # a file another writer may be appending to
    status = cli(capsys, "status", str(out))
    assert status.code == 1 and "1 cell missing" in status.out
    second = run(capsys, out, "--shard", "2/2")
    assert "quarantined episodes.shard-2-of-2.jsonl line 2" in second.out
    assert "ran 1 episode" in second.out
    assert records(out) == reference
    assert cli(capsys, "status", str(out)).code == 0


def test_a_copy_of_a_record_in_a_shard_file_is_quarantined_there(capsys, done: Path,
                                                                 reference) -> None:
    from limbo.run.plan import in_shard

    first = next(line for line in (done / "episodes.jsonl").read_bytes().splitlines(True)
                 if in_shard(json.loads(line)["episode_id"], (1, 2)))
    (done / "episodes.shard-1-of-2.jsonl").write_bytes(first)
    again = run(capsys, done, "--shard", "1/2")
    assert "quarantined episodes.shard-1-of-2.jsonl line 1: duplicate of episodes.jsonl" in again.out
    assert records(done) == reference


def test_resuming_into_another_grids_directory_refuses_naming_both(capsys, done: Path,
                                                                   reference) -> None:
    before = sorted(p.name for p in done.iterdir())
    line = refused(cli(capsys, "run", "--template", "refund_dispute", "--out", str(done)),
                   "holds another grid: 'default' (48 cells, fingerprint 48-")
    assert "this run is grid 'default' (240 cells, fingerprint 240-" in line
    assert sorted(p.name for p in done.iterdir()) == before and records(done) == reference


def test_the_same_grid_spelled_differently_is_the_same_grid(capsys, done: Path) -> None:
    again = cli(capsys, "run", "--model", "policy/verify", "--model", "policy/verify",
                "--template", "charge_invoice", "--contract", "keys-everywhere", "--contract",
                "native", "--out", str(done), "--quiet")
    assert again.code == 0 and "ran 0 episodes, 48 already done" in again.out


def test_a_directory_held_by_another_writer_is_refused_naming_it(capsys, done: Path) -> None:
    lock = WriterLock(done, None)
    lock.acquire()
    try:
        line = refused(run(capsys, done), "is in use: another writer is running — pid "
                                          f"{os.getpid()} on ")
        assert "(the whole directory, since " in line
        refused(run(capsys, done, "--shard", "1/3"), "a writer of the whole directory, which "
                                                    "overlaps shard 1/3")
        status = cli(capsys, "status", str(done))
        assert status.code == 1 and f"writer: pid {os.getpid()}" in status.out
    finally:
        lock.release()
    assert run(capsys, done).code == 0


@pytest.mark.parametrize(("held", "asked", "allowed"), [
    ("1/2", "1/3", False), ("1/2", "2/2", True), ("1/3", "2/3", True), ("1/2", "1/2", False),
    ("1/2", None, False), ("2/4", "1/2", True), ("2/4", "2/2", False), ("1/6", "2/4", True), ("1/6", "3/4", False),
])
def test_overlapping_shards_refuse_and_disjoint_ones_run(capsys, tmp_path: Path, held: str,
                                                         asked: str | None, allowed: bool) -> None:
    out = tmp_path / "run"
    out.mkdir()
    lock = WriterLock(out, tuple(int(x) for x in held.split("/")))  # type: ignore[arg-type]
    lock.acquire()
    try:
        result = run(capsys, out, *(["--shard", asked] if asked else []))
        if allowed:
            assert result.code == 0, result.err
        else:
            refused(result, "is in use")
            assert not list(out.glob("episodes*.jsonl"))
    finally:
        lock.release()


def test_a_stale_lock_of_a_dead_writer_is_taken_over(capsys, done: Path) -> None:
    (done / ".writer.all.lock").write_text('{"pid": 999999, "host": "gone"}')
    (done / ".writer.shard-1-of-2.lock").write_text('{"pid": 999998}')
    assert cli(capsys, "status", str(done)).code == 0
    assert run(capsys, done).code == 0
    assert not (done / ".writer.shard-1-of-2.lock").exists()


@pytest.mark.parametrize(("name", "make", "needle"), [
    ("manifest.json", lambda p: p.mkdir(), "manifest.json is not a regular file"),
    ("manifest.json", lambda p: p.write_text("{not json"), "is not a readable manifest"),
    ("manifest.json", lambda p: p.write_text("[1, 2]"), "is not a manifest (a JSON list)"),
    ("manifest.json", lambda p: p.write_bytes(b"\xff\xfe"), "is not a readable manifest"),
    ("manifest.shard-1-of-2.json", lambda p: p.mkdir(), "is not a file"),
    ("episodes.jsonl", lambda p: p.mkdir(), "episodes.jsonl is not a regular file"),
    ("episodes.jsonl", lambda p: os.mkfifo(p), "episodes.jsonl is not a regular file"),
    (".writers.lock", lambda p: p.mkdir(), "cannot open"),
    (".writer.all.lock", lambda p: p.mkdir(), "cannot open"),
])
def test_run_directory_files_that_are_not_what_they_should_be(capsys, tmp_path: Path, name: str,
                                                              make, needle: str) -> None:
    out = tmp_path / "run"
    out.mkdir()
    make(out / name)
    refused(run(capsys, out), needle)
    assert not list(out.glob("episodes*.jsonl")) or (out / "episodes.jsonl").is_dir() \
        or (out / "episodes.jsonl").is_fifo()


def test_a_quarantine_that_cannot_be_written_is_one_line(capsys, done: Path, reference) -> None:
    (done / "quarantine.jsonl").mkdir()
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:5], b"garbage\n", *lines[5:]]))
    refused(run(capsys, done), "cannot write")
    assert path.read_bytes().count(b"garbage") == 1  # nothing moved, nothing lost
    assert cli(capsys, "status", str(done)).code == 1


def test_status_reports_missing_errored_and_bad_lines(capsys, done: Path) -> None:
    path = done / "episodes.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], b"oops\n", *lines[5:]]))
    result = cli(capsys, "status", str(done), "--json")
    info = json.loads(result.out)
    assert result.code == 1 and not info["ok"]
    assert (info["cells"], info["done"], info["missing"]) == (48, 46, 2)
    assert info["bad_lines"] == ["episodes.jsonl line 4: not JSON (Expecting value at column 1)"]
    assert "2 cells missing" in info["verdict"]


def test_show_of_a_record_limbo_cannot_show_is_one_line(capsys, done: Path) -> None:
    path = done / "episodes.jsonl"
    record = json.loads(path.read_bytes().splitlines()[0])
    record["events"] = [{"type": "call"}]
    record["episode_id"] = "ep-edited"
    with path.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    refused(cli(capsys, "show", str(done), "ep-edited"),
            "is not a valid limbo.episode/1 record: events.0.call.t: Field required")
    refused(cli(capsys, "show", str(done), "ep-nosuch"), f"episode ep-nosuch is not in {done}")
    refused(cli(capsys, "show", str(done / "episodes.jsonl"), "x"), "no run directory")


def test_replay_of_a_directory_without_records(capsys, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "episodes.jsonl").write_text("garbage\n")
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", f"replay/{empty}", *GRID[:2], "--out", str(out),
                 "--quiet", "--contract", "native", "--fault", "none")
    assert result.code == 1, result.err  # every cell errored
    terminations = {r["outcome"]["termination"] for r in records(out)}
    assert terminations == {"model_error"}


def test_status_of_a_manifest_limbo_did_not_write_names_what_it_does_not_say(
        capsys, done: Path) -> None:
    (done / "manifest.json").write_text("{}")
    status = cli(capsys, "status", str(done))
    assert status.code == 1 and "None" not in status.out
    assert "whole grid: 48 of ? done; last pass unknown (manifest.json does not say)" in status.out
    assert "no manifest says how many cells the grid has" in status.out
