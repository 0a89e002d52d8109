"""One reader of records (limbo/log/reader.py, with its quick verdicts in limbo/log/quick.py):
hostile input is met the same way by every reader — the reader's judgement of a line, the
store's scan and iteration (``limbo status``, ``show``, ``list``, a resume), the analysis loader
(``tables``, ``figures``, ``compare``, ``report``) and ``limbo status`` itself — each bad line
skipped and counted, never a crash, never taken; and no module but the reader decodes
records."""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from support.hostile import cli

from limbo.analysis.loader import load
from limbo.base.errors import UsageError
from limbo.commands.common import builtin_design
from limbo.log import reader
from limbo.log.store import iter_records, scan

GRID = ["--template", "charge_invoice", "--model", "policy/verify", "--fault", "timeout_post"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("reference")
    assert main(["run", *GRID, "--out", str(out), "--quiet"]) == 0
    found = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    assert len(found) >= 3
    return found


def _edited(line: bytes, **changes: Any) -> bytes:
    record = json.loads(line)
    record["episode_id"] = "ep-edited"
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = record
        for key in parents:
            target = target[key]
        target[last] = value
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": ")).encode() + b"\n"


def _run(tmp_path: Path, body: bytes, compress: bool = False) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "episodes.jsonl").write_bytes(gzip.compress(body, mtime=0) if compress else body)
    return run


def _every_reader(run: Path) -> dict[str, Any]:
    """What each reader makes of ``run``: records taken, and bad lines by kind."""
    judged = [reader.decode(line.raw) for line in reader.lines(run / "episodes.jsonl")]
    kinds = sorted(j.kind for j in judged if isinstance(j, reader.Skip))
    scanned = scan(run)
    loaded = load([run], builtin_design)
    return {
        "decode": (sum(not isinstance(j, reader.Skip) for j in judged), kinds),
        "scan": (len(scanned.ids), len(scanned.bad)),
        "iter": len(list(iter_records(run))),
        "load": (len(loaded.frame), sorted(p.kind for p in loaded.problems
                                           if p.kind != "no design")),
    }


def _same(found: dict[str, Any], records: int, kind: str | None) -> None:
    bad = [kind] if kind else []
    assert found == {"decode": (records, bad), "scan": (records, len(bad)), "iter": records,
                     "load": (records, bad)}


@pytest.mark.parametrize(("name", "bad", "kind", "reason"), [
    ("truncated last line", lambda g: g[0][:100], reader.UNPARSEABLE, "torn last line"),
    ("non-UTF-8 bytes", lambda g: b'{"schema": "limbo.episode/1", "x": "\xff\xfe"}\n',
     reader.UNPARSEABLE, "not UTF-8 (byte 36)"),
    ("an empty line", lambda g: b"\n", reader.UNPARSEABLE, "an empty line"),
    ("not JSON", lambda g: b"{not json\n", reader.UNPARSEABLE, "not JSON"),
    ("a JSON list", lambda g: b"[1, 2]\n", reader.UNPARSEABLE, "a JSON list, not a record"),
    ("NaN", lambda g: _edited(g[0], outcome__agent_time_s=float("nan")), reader.UNPARSEABLE,
     "not strict JSON (NaN is not JSON)"),
    ("unknown termination", lambda g: _edited(g[0], outcome__termination="crashed"),
     reader.INVALID, "outcome.termination 'crashed' is not one of"),
])
def test_a_bad_line_is_skipped_and_counted_by_every_reader(tmp_path, good, name, bad, kind,
                                                            reason) -> None:
    line = bad(good)
    judged = reader.decode(line)
    assert isinstance(judged, reader.Skip) and (judged.kind, reason) == (
        kind, judged.reason[:len(reason)]), judged
    at_end = name == "truncated last line"
    body = b"".join([*good, line] if at_end else [good[0], line, *good[1:]])
    _same(_every_reader(_run(tmp_path, body)), len(good), kind)


def test_status_reports_the_bad_line_with_the_readers_reason(capsys, tmp_path, good) -> None:
    run = _run(tmp_path, b"".join([good[0], b"\xff\xfe\n", *good[1:]]))
    result = cli(capsys, "status", str(run))
    assert result.code == 1 and "episodes.jsonl line 2: not UTF-8 (byte 0)" in result.out
    assert "Traceback" not in result.out + result.err


def test_an_empty_file_holds_no_records_and_nothing_bad(tmp_path) -> None:
    run = _run(tmp_path, b"")
    assert list(reader.lines(run / "episodes.jsonl")) == []
    scanned = scan(run)
    assert (scanned.ids, scanned.bad, list(iter_records(run))) == (set(), [], [])
    with pytest.raises(UsageError, match="^no episode records could be loaded from "):
        load([run], builtin_design)


def test_an_unknown_version_is_skipped_and_counted_and_a_writer_refuses_it(tmp_path,
                                                                           good) -> None:
    """The one judgement (``unknown schema``) for every reader; what follows is each reader's
    policy: the analysis counts it and goes on, the store refuses the directory (quarantining
    it, or running its cell again, would misread a newer run)."""
    line = _edited(good[0], schema="limbo.episode/9")
    judged = reader.decode(line)
    assert isinstance(judged, reader.Skip) and judged.kind == reader.UNKNOWN
    assert "'limbo.episode/9' is not one this LIMBO reads (limbo.episode/1, limbo.episode/2)" in judged.reason
    assert reader.parts(line) == judged
    run = _run(tmp_path, b"".join([*good, line]))
    loaded = load([run], builtin_design)
    assert len(loaded.frame) == len(good)
    assert [p.kind for p in loaded.problems if p.kind != "no design"] == [reader.UNKNOWN]
    with pytest.raises(reader.RecordError, match=r"episodes.jsonl line \d+: episode ep-edited: "
                                                 r"schema 'limbo.episode/9'"):
        scan(run)


def test_a_huge_record_is_read_and_a_huge_bad_line_is_skipped_with_a_short_reason(
        tmp_path, good) -> None:
    huge = _edited(good[0], header__task_prompt="x" * 20_000_000)
    garbage = b'{"schema": "limbo.episode/1", "episode_id": "' + b"y" * 20_000_000 + b"\n"
    run = _run(tmp_path, b"".join([*good, huge, garbage]))
    _same(_every_reader(run), len(good) + 1, reader.UNPARSEABLE)
    judged = reader.decode(garbage)
    assert isinstance(judged, reader.Skip) and len(judged.reason) < 200
    assert [p for p in load([run], builtin_design).problems if len(p.detail) > 200] == []


def test_a_gzip_file_reads_as_its_plain_text(tmp_path, good) -> None:
    plain = _every_reader(_run(tmp_path / "plain", b"".join(good)))
    packed = _run(tmp_path / "gz", b"".join(good), compress=True)
    assert _every_reader(packed) == plain
    loaded = load([packed], builtin_design)
    assert [len(e) for e in loaded.each_events(loaded.frame, lambda i, ev: list(ev)).values()]


def test_a_gzip_file_cut_short_ends_in_a_torn_line(tmp_path, good) -> None:
    data = gzip.compress(b"".join(good), mtime=0)
    run = _run(tmp_path, b"")
    (run / "episodes.jsonl").write_bytes(data[:-40])  # the last record cut, and the trailer
    found = _every_reader(run)
    assert found["decode"][1] == [reader.UNPARSEABLE] and found["scan"][1] == 1
    assert found["load"][1] == [reader.UNPARSEABLE]
    assert found["iter"] == found["scan"][0] == found["load"][0] < len(good)


# -- no second reader ------------------------------------------------------------------------

PACKAGE = ["limbo", "analysis", "harnesses", "experiments", "services", "faults"]

DECODES_OTHER_JSON = {
    "analysis/report/details.py": "re-parses a line the loader read, to re-encode NaN for a "
                                  "browser",
    "analysis/report/overview.py": "a report's own JSON files",
    "harnesses/guard/schema.py": "a tool call's arguments",
    "harnesses/guard/sqlite.py": "the guard's stored claims",
    "harnesses/production/install.py": "an installed harness's package metadata",
    "harnesses/production/process.py": "a production harness's event stream",
    "harnesses/tool_text.py": "tool calls written as text by a model",
    "limbo/base/provenance.py": "the provenance file",
    "limbo/episode/models.py": "a model's tool-call arguments",
    "limbo/gateway/asgi.py": "an HTTP request body",
    "limbo/gateway/session.py": "the gateway's own log entries",
    "limbo/log/runlock.py": "a lock file's note",
    "limbo/log/store.py": "manifests",
    "limbo/providers/cache.py": "cached model responses",
    "limbo/providers/replay.py": "recorded tool results and a deep copy of a record in memory",
    "limbo/providers/scripted.py": "a script of model turns",
    "limbo/providers/wire.py": "provider wire formats",
    "limbo/proxy/journal.py": "the proxy's journal",
    "limbo/run/limiter_host.py": "the shared limiter's calls between processes",
    "limbo/proxy/wire.py": "MCP messages (every proxy module reads them through wire.loads)",
    "limbo/sim/boundary.py": "tool-call arguments",
    "limbo/sim/tasks.py": "task files",
    "limbo/sim/transport.py": "a transport's message",
}
"""Modules that decode JSON which is not an episode record, each with what it decodes. A new
module that decodes JSON must be added here with its reason — or, if what it decodes is a
record, read it through :mod:`limbo.log.reader` instead."""


def _decodes_json(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
                node.attr in ("raw_decode", "JSONDecoder") or node.attr in ("loads", "load")
                and isinstance(node.value, ast.Name) and node.value.id == "json"):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "json" and any(
                a.name in ("loads", "load", "JSONDecoder") for a in node.names):
            return True
        if (isinstance(node, ast.Attribute) and node.attr in ("Decoder", "decode")
                and isinstance(node.value, ast.Attribute) and node.value.attr == "json"
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "msgspec"):
            return True
    return False


READERS = {"limbo/log/reader.py", "limbo/log/quick.py"}
"""The reader, and its quick verdicts (the same judgement, fewer fields built)."""


def test_no_module_but_the_reader_decodes_records() -> None:
    decoding = {str(path.relative_to(ROOT)) for folder in PACKAGE
                for path in (ROOT / folder).rglob("*.py")
                if _decodes_json(ast.parse(path.read_text(encoding="utf-8")))}
    assert decoding - READERS == set(DECODES_OTHER_JSON), (
        "a module decodes JSON that is not listed as decoding something other than records: "
        "read records through limbo.log.reader, or list what the module decodes")


def test_the_check_finds_a_second_reader() -> None:
    second = ast.parse("import json\n\ndef read(p):\n"
                       "    return [json.loads(l) for l in open(p / 'episodes.jsonl')]\n")
    assert _decodes_json(second)
    assert not _decodes_json(ast.parse("from limbo.log.reader import decode\n"))
    assert _decodes_json(ast.parse("import msgspec\nrows = msgspec.json.Decoder(dict)\n"))
