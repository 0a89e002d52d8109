"""``limbo report`` and ``limbo view`` without a browser: what the site holds, that it is the same
analysis as ``limbo tables``/``limbo figures``, that every entry's link names exactly its
episodes, that each episode's details sit where the page will look, the one-line errors, and
the live server's refusals and refresh."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from html import escape
from pathlib import Path

import pytest
from support.report_runs import add_hostile, limbo, records, run_slice

from limbo.analysis.data import Data
from limbo.analysis.loader import load
from limbo.analysis.report.details import bucket_file
from limbo.analysis.report.index import bucket_count, bucket_of
from limbo.analysis.report.serve import Live
from limbo.analysis.tables import TABLES, build_safely
from limbo.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("site")
    run = run_slice(root / "run")
    add_hostile(run)
    out = root / "report"
    assert main(["report", str(run), "--out", str(out)]) == 0
    return {"run": run, "out": out, "root": root}


def _payload(path: Path) -> object:
    """The JSON argument of a data script ``LIMBO.receive("kind",<json>);``."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index(",") + 1:text.rindex(");")])


def _bucket(path: Path) -> dict:
    packed = re.search(r'"([A-Za-z0-9+/=]+)"\);\s*$', path.read_text()).group(1)
    return json.loads(gzip.decompress(base64.b64decode(packed)))


def test_every_table_and_figure_of_the_analysis_is_in_the_overview(built) -> None:
    html = (built["out"] / "index.html").read_text(encoding="utf-8")
    tables, _ = build_safely(Data(load([built["run"]])), list(TABLES))
    for table in tables:
        assert f'id="table-{table.number}"' in html and table.title in html
        for row in table.rows:
            for entry in row:
                assert escape(entry.shown) in html
        for line in [*table.provenance(), table.caveat]:  # what each table was computed from
            assert escape(line) in html
    figures = built["root"] / "figures"
    assert main(["figures", str(built["run"]), "--out", str(figures)]) in (0, 1)
    drawn = sorted(p.name for p in figures.glob("*.png"))
    assert drawn, "the slice draws at least one figure"
    for name in drawn:  # the same files `limbo figures` writes
        assert f"figures/{name}" in html
        assert (built["out"] / "figures" / name).read_bytes() == (figures / name).read_bytes()


def test_each_linked_entry_names_exactly_the_episodes_it_was_computed_over(built) -> None:
    index = _payload(built["out"] / "data" / "index.js")
    cells = _payload(built["out"] / "data" / "cells.js")
    data = Data(load([built["run"]]))
    tables = {t.number: t for t in build_safely(data, list(TABLES))[0]}
    assert "3.1.3" in cells  # Table 3, policy/verify, dup: late commit
    for ident, cell in cells.items():
        number, r, c = map(int, ident.split("."))
        entry = tables[number].rows[r][c]
        positions, at = [], 0
        for gap in cell["rows"].split(","):
            at += int(gap)
            positions.append(at)
        ids = {index["ids"][p] for p in positions}
        assert ids == set(data.frame.loc[entry.behind.rows, "episode_id"]), ident
        assert cell["count"] == entry.denominator == len(ids)
        assert cell["outcome"] == entry.behind.outcome
    late = cells["3.1.3"]
    assert (late["row"], late["column"], late["outcome"]) == ("policy/verify",
                                                               "dup: late commit", "duplicate")


def test_every_episode_is_in_the_bucket_its_id_names(built) -> None:
    stored = {r["episode_id"]: r for path in sorted(built["run"].glob("episodes*.jsonl"))
              for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
    buckets = bucket_count(len(stored))
    assert _payload(built["out"] / "data" / "meta.js")["buckets"] == buckets
    found = {}
    for n in range(buckets):
        for episode_id, detail in _bucket(built["out"] / bucket_file(n)).items():
            assert bucket_of(episode_id, buckets) == n
            found[episode_id] = detail
    assert set(found) == set(stored)
    for episode_id, detail in found.items():
        site = detail.pop("_site")
        assert detail == stored[episode_id]
        assert shlex.split(site["rerun"]) == ["limbo", "episode", "--from", str(built["run"]),
                                              episode_id]


def test_the_buckets_of_many_ids_are_each_ids_own() -> None:
    """The bucket of each of many ids, hashed a code unit at a time for all ids of one length,
    is FNV-1a over that id's UTF-16 code units (written out here, as common.js has it): ids of
    mixed lengths, empty, beyond the BMP (surrogate pairs), with a lone surrogate, hostile."""
    from limbo.analysis.report.index import buckets_of

    def fnv(text: str) -> int:
        data = text.encode("utf-16-le", "surrogatepass")
        h = 0x811C9DC5
        for unit in (int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)):
            h = ((h ^ unit) * 0x01000193) % 2**32
        return h

    ids = ["ep-0b450940d92810b4b3f3", "", "épisode-ü", "ep-😀-x", "\ud800", "<b>\"'&",
           *(f"ep-{n:020x}" for n in range(0, 10**6, 997)), "x" * 300]
    for buckets in (1, 7, 421, 619):
        assert buckets_of(ids, buckets).tolist() == [fnv(i) % buckets for i in ids]
        assert [bucket_of(i, buckets) for i in ids] == [fnv(i) % buckets for i in ids]
    assert buckets_of([], 5).tolist() == []


def test_a_late_commit_is_labelled_a_duplicate_copy_in_the_details(built) -> None:
    record = next(r for r in records(built["run"]) if r["cell"]["fault"] == "timeout_late"
                  and r["outcome"]["duplicate"])
    buckets = _payload(built["out"] / "data" / "meta.js")["buckets"]
    n = bucket_of(record["episode_id"], buckets)
    roles = _bucket(built["out"] / bucket_file(n))[record["episode_id"]]["_site"]["ledger_roles"]
    copies = sorted((v["intent"], v["copy"], v["of"]) for v in roles.values())
    assert any(copy == 2 and of == 2 for _, copy, of in copies)


def test_errors_are_shown_with_their_reasons_and_input_problems_listed(built, tmp_path) -> None:
    html = (built["out"] / "index.html").read_text(encoding="utf-8")
    section = html[html.index("id='errors'"):html.index("id='tables'")]
    assert "infra_error" in section and "RuntimeError: &lt;img" in section
    assert "<img src" not in section  # escaped, never markup
    run = tmp_path / "run"
    run.mkdir()
    good = (built["run"] / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (run / "episodes.jsonl").write_bytes(b"".join(good[:2]) + b'{"not json\n' + good[2][:30])
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "Input problems" in page and "unparseable" in page and "torn last line" in page


def test_odd_lines_still_give_strict_details(built, tmp_path: Path) -> None:
    """A NaN in a record, and a line whose end is garbage (the loader reads a record by its
    cell and outcome): the report is written, and every bucket is JSON a browser parses."""
    base = records(built["run"])[0]
    nan = {**base, "episode_id": "ep-nan", "usage": [{"turn": 1, "cost_usd": float("nan")}]}
    torn = json.dumps({**base, "episode_id": "ep-garbage"})[:-1] + ', "events": [}'
    run = tmp_path / "run"
    run.mkdir()
    (run / "episodes.jsonl").write_text(json.dumps(nan) + "\n" + torn + "\n")
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    buckets = _payload(tmp_path / "r" / "data" / "meta.js")["buckets"]
    found = {}
    for n in range(buckets):
        text = gzip.decompress(base64.b64decode(re.search(
            r'"([A-Za-z0-9+/=]+)"\);', (tmp_path / "r" / bucket_file(n)).read_text()).group(1)))
        found.update(json.loads(text, parse_constant=lambda token: pytest.fail(token)))
    assert found["ep-nan"]["usage"][0]["cost_usd"] is None
    assert found["ep-nan"]["events"] == base["events"]
    assert "does not parse" in found["ep-garbage"]["_site"]["unreadable"]


@pytest.mark.parametrize("case", ["missing run", "out is a file", "out holds other files",
                                  "empty run"])
def test_user_errors_are_one_line_and_touch_nothing(case: str, built, tmp_path: Path) -> None:
    run, out = built["run"], tmp_path / "out"
    if case == "missing run":
        run = tmp_path / "nowhere"
    elif case == "out is a file":
        out.write_text("mine")
    elif case == "out holds other files":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    else:
        run = tmp_path / "empty"
        run.mkdir()
    done = limbo("report", str(run), "--out", str(out))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("limbo: error: ") and "Traceback" not in done.stderr
    if case == "out is a file":
        assert out.read_text() == "mine"
    elif case == "out holds other files":
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    else:
        assert not out.exists()


def test_a_new_report_replaces_an_earlier_one_whole(built, tmp_path: Path) -> None:
    out = tmp_path / "report"
    shutil.copytree(built["out"], out)
    stale = out / bucket_file(999)
    stale.write_text("left over")
    one = tmp_path / "one"
    one.mkdir()
    (one / "episodes.jsonl").write_text(
        (built["run"] / "episodes.jsonl").read_text().splitlines()[0] + "\n")
    assert main(["report", str(one), "--out", str(out)]) == 0
    assert not stale.exists()
    assert sorted(p.name for p in (out / "episodes").iterdir()) == ["b0000.js"]
    assert not list(tmp_path.glob(".report.*"))  # no staging folder left behind


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_live_site_rebuilds_when_the_run_grows(built, tmp_path: Path) -> None:
    lines = (built["run"] / "episodes.jsonl").read_text().splitlines(keepends=True)
    run = tmp_path / "run"
    run.mkdir()
    live = Live([run], "template")
    assert live.site.episodes == 0 and b"No episodes yet" in live.get("index.html")
    (run / "episodes.jsonl").write_text("".join(lines[:4]))
    assert live.refresh() and live.site.episodes == 4 and live.site.version == 1
    assert not live.refresh()  # nothing changed
    with (run / "episodes.jsonl").open("a") as fh:
        fh.write(lines[4][:25])
    assert live.refresh() and live.site.episodes == 4  # a line being written is not an episode
    assert json.loads(live.get("api/version")) == {"version": 2, "episodes": 4}


def _view_checks(url: str, episodes: int) -> None:
    status, body = _get(url)
    assert status == 200 and b"LIMBO run report" in body
    assert json.loads(_get(url + "api/version")[1]) == {"version": 0, "episodes": episodes}
    assert _get(url + bucket_file(0))[0] == 200
    assert _get(url + "episodes/b9999.js")[0] == 404
    assert _get(url + "../../etc/passwd")[0] == 404
    assert _get(url, host="evil.example:80")[0] == 403  # DNS rebinding


def test_the_docs_commands_run_and_view_refuses_foreign_hosts(built, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "report.md").read_text()
    commands = [line.split("#")[0].strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S)
                for line in block.splitlines() if line.startswith("limbo ")]
    assert {c.split()[1] for c in commands} == {"report", "view"}
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "demo").symlink_to(built["run"])
    episodes = _payload(built["out"] / "data" / "meta.js")["episodes"]
    bindir = Path(sys.executable).parent
    for command in commands:
        argv = [str(bindir / "limbo"), *shlex.split(command)[1:]]
        if argv[1] == "report":
            done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
            assert done.returncode == 0, (command, done.stderr)
            assert (tmp_path / "runs" / "demo-report" / "index.html").is_file()
            continue
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
        try:
            _view_checks(re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline()).group(0),
                         episodes)
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=10) == 0
