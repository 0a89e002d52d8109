"""The reader's quick verdict (:func:`limbo.log.quick.glance`, what ``limbo status`` and a
resume count with) against its full one (:func:`limbo.log.reader.decode`): every line — a
written record, a record edited into every shape the fast path must refuse to vouch for, a
line with its bytes broken at random — gets the same verdict and the same fields from both,
whichever decoder took it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limbo.log import quick, reader
from limbo.log.quick import Glance, Tallied
from limbo.log.reader import RecordError, Skip
from limbo.log.store import iter_records, iter_tallied
from limbo.run.summary import Summary

GRID = ["--template", "announce_linkedin", "--model", "policy/blind", "--fault", "timeout_late",
        "--fault", "none", "--instances", "1"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("glance")
    assert main(["run", *GRID, "--out", str(out), "--quiet"]) == 0
    return (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)


def _full(raw: bytes) -> Glance | Skip:
    """What ``limbo status`` counted before the quick path: the record :func:`decode` gives."""
    record = reader.decode(raw)
    if isinstance(record, Skip):
        return record
    outcome = record["outcome"]
    return Glance(record["episode_id"], outcome["termination"],
                  outcome.get("termination_reason"), record["cell"].get("model"),
                  outcome.get("fault_fired"))


def _same(raw: bytes) -> Glance | Skip:
    found = quick.glance(raw)
    expected = _full(raw)
    assert found == expected, raw[:200]
    assert type(found.reason if isinstance(found, Glance) else None) is type(
        expected.reason if isinstance(expected, Glance) else None)
    return found


def test_every_written_record_takes_the_quick_path_and_reads_the_same(written) -> None:
    for raw in written:
        assert quick._typed(raw) is not None  # the fast decoder vouched for it
        assert isinstance(_same(raw), Glance)


EDITS = {
    "a big integer as the reason": lambda r: r["outcome"].update(termination_reason=10**30),
    "a number as the model": lambda r: r["cell"].update(model=7),
    "no model": lambda r: r["cell"].pop("model"),
    "no fault_fired": lambda r: r["outcome"].pop("fault_fired"),
    "fault_fired a string": lambda r: r["outcome"].update(fault_fired="yes"),
    "an unknown termination": lambda r: r["outcome"].update(termination="exploded"),
    "an unknown event type": lambda r: r["events"].append({"t": 1.0, "type": "later_kind"}),
    "an event that is a list": lambda r: r["events"].append([1]),
    "an event without a type": lambda r: r["events"].append({"t": 1.0}),
    "a newer schema": lambda r: r.update(schema="limbo.episode/99"),
    "no schema prefix": lambda r: r.update(schema="episode/1"),
    "a bad id": lambda r: r.update(episode_id="has space"),
    "cell a list": lambda r: r.update(cell=[1]),
    "events an object": lambda r: r.update(events={}),
    "a big integer deep inside": lambda r: r["header"].update(seed=-(10**25)),
    "a lone surrogate in a report": lambda r: r["report"].update(summary="\ud800"),
    "a float beyond double": lambda r: r["header"].update(x=1e308),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_record_gets_the_full_readers_verdict(written, edit: str) -> None:
    record = json.loads(written[0])
    EDITS[edit](record)
    raw = json.dumps(record, separators=(", ", ": ")).encode() + b"\n"
    _same(raw)


@pytest.mark.parametrize("raw", [
    b"", b"\n", b"   \n", b"[1]\n", b"null\n", b'"x"\n', b"{}\n",
    b'\xef\xbb\xbf{"schema": "limbo.episode/1"}\n',
])
def test_lines_that_are_no_record_are_skipped_alike(raw: bytes) -> None:
    assert isinstance(_same(raw), Skip)


def test_text_edits_that_only_json_tells(written) -> None:
    line = written[0]
    cases = [
        line[:-1],  # torn
        line[:-2] + b', "x": NaN}\n',  # not strict
        line[:-2] + b', "x": Infinity}\n',
        line[:-2] + b', "x": "\\ud800"}\n',  # a lone surrogate escape: Python takes it
        line[:-2] + b', "x": "\\x"}\n',  # a bad escape
        line[:-2] + b', "x": "a\x01b"}\n',  # a control character in a string
        line[:-2] + b', "x": "\xff"}\n',  # not UTF-8, in a part the quick path skips
        line[:-2] + b', "x": "\xed\xa0\x80"}\n',  # an encoded surrogate
        line[:-2] + b', "x": [1,]}\n',
        line[:-2] + b', "x": 01}\n',
        line[:-2] + b"} \n",  # whitespace after the object
        line[:-2] + b"}}\n",
        line.replace(b'"outcome": {', b'"outcome": {"termination": "timeout", ', 1),  # duplicate key
        line.replace(b'"cell": {', b'"\\u0063ell": 5, "cell": {', 1),  # an escaped key, then the real one
        line.replace(b'"cell": {', b'"cell": 5, "\\u0063ell": {', 1),
        line[:-2] + b', "deep": ' + b"[" * 390 + b"]" * 390 + b"}\n",
        line[:-2] + b', "deep": ' + b"[" * 2000 + b"]" * 2000 + b"}\n",
    ]
    for raw in cases:
        _same(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_record_broken_at_random_gets_the_same_verdict(written, data: st.DataObject) -> None:
    raw = bytearray(data.draw(st.sampled_from(written)))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        kind = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        byte = data.draw(st.sampled_from(list(b'{}[],:"\\ 0aeE-.\n\x00\xff') + [0x80]))
        if kind == "replace":
            raw[at] = byte
        elif kind == "delete":
            del raw[at]
        else:
            raw.insert(at, byte)
    _same(bytes(raw))


# ------------------------------------------------------------------ the end-of-run summary


def _summed(parts: tuple[Any, Any]) -> Summary | type[BaseException]:
    """What :meth:`Summary.add` makes of one record's (cell, outcome): its summary, or the
    error it raises on a record without a field it counts."""
    try:
        return Summary.of([("here", *parts)])
    except Exception as exc:  # noqa: BLE001 - the failure is what is compared
        return type(exc)


def _same_tally(raw: bytes) -> Tallied | Skip:
    """:func:`tallied_line` gives :func:`decode`'s verdict, and a record's summary from its
    parts is the summary of the whole record."""
    found = quick.tallied_line(raw)
    record = reader.decode(raw)
    if isinstance(record, Skip):
        assert found == record, raw[:200]
        return found
    assert not isinstance(found, Skip), raw[:200]
    assert found[0] == record["episode_id"]
    assert _summed(found[1:]) == _summed((record["cell"], record["outcome"])), raw[:200]
    return found


SUMMARY_EDITS = {
    **EDITS,
    "duplicate an integer": lambda r: r["outcome"].update(duplicate=1),
    "no task_success": lambda r: r["outcome"].pop("task_success"),
    "cost an integer": lambda r: r["outcome"].update(cost_usd=3),
    "no cost": lambda r: r["outcome"].pop("cost_usd"),
    "cost unknown": lambda r: r["outcome"].update(cost_usd=None),
    "cost a flag": lambda r: r["outcome"].update(cost_usd=True),
    "no fault": lambda r: r["cell"].pop("fault"),
    "a number as the fault": lambda r: r["cell"].update(fault=3),
    "errored, with a reason": lambda r: r["outcome"].update(termination="infra_error",
                                                             termination_reason="boom\nmore"),
    "model calls in the outcome": lambda r: r["outcome"].update(model_calls={"responses": 2}),
}


def test_every_written_record_is_tallied_on_the_quick_path(written) -> None:
    for raw in written:
        assert quick._shaped(raw, quick._TALLY) is not None
        _same_tally(raw)


@pytest.mark.parametrize("edit", sorted(SUMMARY_EDITS))
def test_an_edited_record_is_tallied_as_the_whole_record(written, edit: str) -> None:
    record = json.loads(written[-1])
    SUMMARY_EDITS[edit](record)
    _same_tally(json.dumps(record, separators=(", ", ": ")).encode() + b"\n")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_record_broken_at_random_is_tallied_as_the_full_reader_reads_it(
        written, data: st.DataObject) -> None:
    raw = bytearray(data.draw(st.sampled_from(written)))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at:at + 1] = data.draw(st.sampled_from([b"", b"0", b"1", b'"', b"}", b"t", b"\xff"]))
    _same_tally(bytes(raw))


def test_a_resumed_runs_summary_counts_what_the_whole_records_count(written, tmp_path) -> None:
    """Over a directory with a duplicate, a bad line, an errored record and records only the
    full reader can read, :func:`iter_tallied` sums what :func:`iter_records` sums; a record of
    a newer schema stops both alike."""
    odd = [json.loads(written[0]), json.loads(written[1])]
    odd[0]["outcome"].update(duplicate=1)
    odd[1]["outcome"].update(termination="infra_error", termination_reason="broken")
    lines = [*written, written[0], b"not json\n",
             *(json.dumps(r, separators=(", ", ": ")).encode() + b"\n" for r in odd)]
    (tmp_path / "episodes.jsonl").write_bytes(b"".join(lines))
    whole = Summary.of(("", r["cell"], r["outcome"]) for r in iter_records(tmp_path))
    assert Summary.of(iter_tallied(tmp_path)) == whole
    assert whole.total.episodes == len(written) and whole.errors.count() == 0  # odd are copies
    (tmp_path / "episodes.shard-1-of-2.jsonl").write_bytes(b"".join(
        json.dumps(r, separators=(", ", ": ")).encode() + b"\n"
        for r in [{**odd[1], "episode_id": "ep-" + "0" * 20}]))
    both = Summary.of(("", r["cell"], r["outcome"]) for r in iter_records(tmp_path))
    assert Summary.of(iter_tallied(tmp_path)) == both and both.errors.count() == 1
    newer = {**json.loads(written[0]), "schema": "limbo.episode/99", "episode_id": "ep-" + "1" * 20}
    (tmp_path / "episodes.shard-2-of-2.jsonl").write_bytes(json.dumps(newer).encode() + b"\n")
    with pytest.raises(RecordError):
        list(iter_records(tmp_path))
    with pytest.raises(RecordError):
        list(iter_tallied(tmp_path))
