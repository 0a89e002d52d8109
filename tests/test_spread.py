"""Judging a records file's lines on every core (:mod:`limbo.log.spread`) against one pass over
its lines (:func:`limbo.log.lines.lines`): the same lines, numbers, offsets and verdicts in the
same order whatever the file holds, however it is cut, whatever a helper process does."""

from __future__ import annotations

import gzip
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from support.children import children

from limbo.log import spread
from limbo.log.lines import lines
from limbo.log.spread import judged
from limbo.log.store import scan

HOSTILE = [b"\n", b"{}\n", b"\xff\xfe not utf-8\n", b"x" * 70_000 + b"\n", b"\r\n", b"[1,2]\r\n",
           "caf\u00e9 \u2603\n".encode(), b"{\"a\": 1}\n"]


def _file(tmp_path: Path, count: int = 2_000, torn: bytes = b"") -> Path:
    path = tmp_path / "episodes.jsonl"
    body = b"".join(b'{"line": %d}\n' % i + HOSTILE[i % len(HOSTILE)] for i in range(count))
    path.write_bytes(body + torn)
    return path


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is worth a fork, on four parts (this machine may have fewer cores)."""
    monkeypatch.setattr(spread, "SPLIT_BYTES", 0)
    monkeypatch.setattr(spread, "cores", lambda: 4)
    assert threading.active_count() == 1, "a thread is alive: judged() would not fork"


def _pid_and_line(raw: bytes) -> tuple[int, bytes]:
    return os.getpid(), raw


def _serial(path: Path) -> list[tuple[int, int, int, bool, bytes]]:
    return [(line.number, line.offset, len(line.raw), line.torn, line.raw) for line in lines(path)]


def _spread(path: Path) -> tuple[list[tuple[int, int, int, bool, bytes]], set[int]]:
    found = []
    for spot, (pid, raw) in judged(path, _pid_and_line):
        assert spot.line() == raw  # read back while the file is judged
        found.append((spot, (pid, raw)))
    return ([(s.number, s.offset, s.length, s.torn, raw) for s, (_, raw) in found],
            {pid for _, (pid, _) in found})


@pytest.mark.parametrize("torn", [b"", b'{"torn": tr', b"\xff"])
def test_the_parts_give_every_line_once_in_order(tmp_path: Path, split: None, torn: bytes) -> None:
    path = _file(tmp_path, torn=torn)
    found, pids = _spread(path)
    assert found == _serial(path)
    assert len(pids) == 4 and os.getpid() in pids  # three helpers and this process


def test_a_line_longer_than_a_read_is_one_line(tmp_path: Path, split: None) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(b"%d %s\n" % (i, b"y" * (i * 700_000)) for i in range(6)))
    found, pids = _spread(path)
    assert found == _serial(path)
    assert len(pids) > 1


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_a_file_of_few_lines_is_cut_no_finer_than_its_lines(tmp_path: Path, split: None,
                                                            count: int) -> None:
    path = tmp_path / "few.jsonl"
    path.write_bytes(b"".join(b"%d\n" % i for i in range(count)))
    found, pids = _spread(path)
    assert found == _serial(path)
    assert len(pids) <= count


def test_an_empty_file_has_no_lines(tmp_path: Path, split: None) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert list(judged(path, _pid_and_line)) == []


def test_a_gzip_file_a_small_file_and_a_threaded_process_are_read_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spread, "cores", lambda: 4)
    plain = _file(tmp_path, count=300)
    packed = tmp_path / "episodes.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert _spread(plain) == (_serial(plain), {os.getpid()})  # under SPLIT_BYTES
    monkeypatch.setattr(spread, "SPLIT_BYTES", 0)
    assert _spread(packed) == (_serial(packed), {os.getpid()})
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert _spread(plain) == (_serial(plain), {os.getpid()})
    finally:
        stop.set()
        other.join()


def test_a_helper_that_fails_has_its_part_judged_here(tmp_path: Path, split: None) -> None:
    path = _file(tmp_path)
    parent = os.getpid()

    def judge(raw: bytes) -> bytes:
        if os.getpid() != parent and raw.startswith(b'{"line": 1'):
            os._exit(3)  # killed mid-part, as by the kernel
        return raw

    found = list(judged(path, judge))
    assert [(s.number, s.offset, s.length, s.torn, raw) for s, raw in found] == _serial(path)
    assert children() == []


def test_a_fork_that_fails_leaves_the_part_to_this_process(tmp_path: Path, split: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path)
    forks = iter([None, OSError("fork: out of memory")])

    def fork() -> int:
        failure = next(forks, None)
        if failure is not None:
            raise failure
        return real()

    real = os.fork
    monkeypatch.setattr(os, "fork", fork)
    found, pids = _spread(path)
    assert found == _serial(path)
    assert len(pids) == 3  # this process judged its own part and the one no helper took
    assert children() == []


def test_a_judge_that_raises_raises_here_in_its_place_and_leaves_no_helper(
        tmp_path: Path, split: None) -> None:
    path = _file(tmp_path)
    lines_ = _serial(path)
    at = next(i for i, line in enumerate(lines_) if line[4] == b'{"line": 1990}\n')
    seen: list[bytes] = []

    def judge(raw: bytes) -> bytes:
        if raw == lines_[at][4]:
            raise ValueError("a bug in the judge")
        return raw

    with pytest.raises(ValueError, match="a bug in the judge"):
        for _, raw in judged(path, judge):
            seen.append(raw)
    assert seen == [line[4] for line in lines_[:at]]
    assert children() == []


def test_a_reader_that_stops_early_leaves_no_helper(tmp_path: Path, split: None) -> None:
    path = _file(tmp_path)
    found = judged(path, _pid_and_line)
    assert next(found)[0].number == 1
    found.close()
    assert children() == []


def test_lines_appended_meanwhile_are_the_next_readers(tmp_path: Path, split: None) -> None:
    path = _file(tmp_path, torn=b'{"being": "writ')
    before = _serial(path)
    found = judged(path, _pid_and_line)
    first = next(found)
    with path.open("ab") as fh:
        fh.write(b'ten"}\n{"after": 1}\n')
    rest = [(s.number, s.offset, s.length, s.torn, raw) for s, (_, raw) in found]
    assert [(first[0].number, first[0].offset, first[0].length, first[0].torn,
             first[1][1])] + rest == before  # the last line as it stood: torn


def test_a_run_directory_scans_the_same_on_every_core(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from limbo.cli import main

    out = tmp_path / "run"
    assert main(["run", "--template", "announce_linkedin", "--model", "policy/blind",
                 "--fault", "timeout_late", "--fault", "none", "--instances", "3", "--out",
                 str(out), "--quiet"]) == 0
    records = out / "episodes.jsonl"
    good = records.read_bytes().splitlines(keepends=True)
    records.write_bytes(b"".join([good[0], b"not json\n", *good[1:], good[2], b"\xff\n",
                                  good[0][:40]]))
    one = scan(out)
    monkeypatch.setattr(spread, "SPLIT_BYTES", 0)
    monkeypatch.setattr(spread, "cores", lambda: 3)
    helpers: list[int] = []

    class Counted(spread._Helper):  # type: ignore[type-arg]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            helpers.append(self.beside.pid)

    monkeypatch.setattr(spread, "_Helper", Counted)
    spread_scan = scan(out, live=lambda p: False)
    assert len(helpers) == 2

    def facts(found: Any) -> Any:
        return (found.ids, found.terminations, found.errored, found.rated, found.files,
                [(b.path, b.line, b.reason, b.raw, b.torn) for b in found.bad])

    assert facts(spread_scan) == facts(one)
    assert len(one.bad) == 4  # the bad line, the duplicate, the non-UTF-8 line, the torn one


def test_a_helpers_spot_reads_its_line_only_while_the_file_is_judged(tmp_path: Path,
                                                                     split: None) -> None:
    path = _file(tmp_path)
    found = list(judged(path, len))
    last = found[-1][0]
    assert last.raw is None  # judged by a helper
    with pytest.raises(ValueError, match="no longer being judged"):
        last.line()


def test_a_file_replaced_while_it_is_judged_is_read_as_it_was(tmp_path: Path,
                                                              split: None) -> None:
    path = _file(tmp_path)
    before = _serial(path)
    found = judged(path, _pid_and_line)
    first = next(found)
    fresh = tmp_path / "fresh.jsonl"
    fresh.write_bytes(b'{"another": "file"}\n' * 9_000)
    fresh.replace(path)  # as a quarantine replaces a records file
    rest = [(s.number, s.offset, s.length, s.torn, s.line(), raw) for s, (_, raw) in found]
    assert [line[4] for line in rest] == [line[5] for line in rest]
    assert [(first[0].number, first[0].offset, first[0].length, first[0].torn, first[1][1])] + [
        line[:5] for line in rest] == before


def test_a_file_cut_short_as_it_is_read_ends_where_it_was_cut(tmp_path: Path, split: None,
                                                               monkeypatch) -> None:
    path = _file(tmp_path)
    cut = path.stat().st_size // 3 + 7  # in the second of four parts, inside a line
    real = spread._Source.read

    def read(self: Any, offset: int, length: int) -> bytes:  # truncated once it was opened
        return real(self, offset, length)[:max(0, cut - offset)]

    monkeypatch.setattr(spread._Source, "read", read)
    found = [(s.number, s.offset, s.length, s.torn, raw) for s, raw in judged(path, bytes)]
    short = tmp_path / "short.jsonl"
    short.write_bytes(path.read_bytes()[:cut])
    assert found == _serial(short)
