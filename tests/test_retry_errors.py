"""Errored cells can be completed: ``limbo run ... --retry-errors`` runs again the cells whose
record ended in ``infra_error`` or ``model_error`` (and ``timeout`` with ``=timeout``), keeping
the old records as superseded history that no reader counts. ``limbo status`` exits 1 while
errored cells remain and says why, grouped, with the command that retries them.

The provider is a real OpenAI-compatible server on 127.0.0.1 (``support.bad_server``) reached
through the real SDK: it fails every call, then recovers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from support.bad_server import CHAT_OK, BadServer, Reply, acting
from support.hostile import cli, records

from limbo.log.moves import supersede
from limbo.log.store import SUPERSEDED, iter_records, scan, temp_name

BOOM = Reply(500, b'{"error": {"message": "upstream exploded", "type": "server_error"}}')
GRID = ["e1", "--template", "charge_invoice", "--instances", "1", "--no-cache", "--quiet",
        "--error-streak", "0"]  # every cell errs: the run is not stopped early here
CELLS = 24  # e1 over charge_invoice: 12 faults + none, both focal-write classes


def _model(server: BadServer) -> str:
    return f"openai/m?api=chat&base_url={server.url}&max_attempts=1"


def _episodes_in_table3(capsys, out: Path) -> int:
    table = cli(capsys, "tables", str(out), "--table", "3", "--format", "csv")
    assert table.code == 0, table.err
    rows = [r for r in csv.DictReader(io.StringIO(table.out))
            if r["row"] != "all models" and r["column"] == "episodes"]
    assert len(rows) == 1, table.out
    return int(float(rows[0]["value"]))


def test_a_failing_server_then_a_retry_leaves_every_cell_done_once(capsys, tmp_path) -> None:
    """Must-show 1: every call fails; status names why and exits 1; once the server recovers,
    --retry-errors leaves no errored cell, and status, tables, report and check count each cell
    once."""
    out = tmp_path / "run"
    with BadServer(BOOM) as server:
        args = ["run", *GRID, "--model", _model(server), "--out", str(out)]
        first = cli(capsys, *args)
        assert first.code == 1, first.err
        assert f"{CELLS} episodes ended in infra_error or model_error" in first.out
        assert "--retry-errors" in first.out

        status = cli(capsys, "status", str(out))
        assert status.code == 1
        assert f"{CELLS} × model_error: openai/m: gave up after 1 attempt" in status.out
        assert "HTTP 500" in status.out and "upstream exploded" in status.out
        assert f"{CELLS} cells ended in an error" in status.out
        retry_line = next(line for line in status.out.splitlines() if "run them again" in line)
        assert retry_line.endswith("--retry-errors") and "--template charge_invoice" in retry_line

        again = cli(capsys, *args)  # without the flag, a re-run leaves them as they are
        assert again.code == 1 and "ran 0 episodes" in again.out

        server.respond = acting()  # the server recovers
        retried = cli(capsys, *args, "--retry-errors")
        assert retried.code == 0, retried.out + retried.err
        assert f"ran {CELLS} episodes ({CELLS} errored cells set aside" in retried.out

    got = records(out)  # strict: each id once
    assert len(got) == CELLS
    assert {r["outcome"]["termination"] for r in got} == {"finished"}
    rated = sum(r["outcome"]["fault_fired"] for r in got)
    assert 0 < rated <= CELLS
    history = [json.loads(line) for line in (out / SUPERSEDED).read_text().splitlines()]
    assert len(history) == CELLS and {r["outcome"]["termination"] for r in history} == {
        "model_error"}
    assert {r["episode_id"] for r in history} == {r["episode_id"] for r in got}

    status = cli(capsys, "status", str(out), "--json")
    info = json.loads(status.out)
    assert status.code == 0 and info["done"] == CELLS and info["missing"] == 0
    assert info["errored"] == {} and info["superseded"] == CELLS
    assert _episodes_in_table3(capsys, out) == rated  # each cell once (a copy would conflict)
    report = cli(capsys, "report", str(out), "--out", str(tmp_path / "report"))
    assert report.code == 0 and f"({CELLS} episodes" in report.out
    check = cli(capsys, "check", str(out), "--max-dup", "1")
    assert ", 0 errored" in check.out


def test_timeouts_are_retried_only_when_asked(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    with BadServer(Reply(body=CHAT_OK, delay_s=2.0)) as server:
        args = ["run", "default", "--template", "charge_invoice", "--fault", "none",
                "--contract", "native", "--no-cache", "--quiet", "--model", _model(server),
                "--out", str(out)]
        slow = cli(capsys, *args, "--episode-timeout", "0.5")
        assert slow.code == 0  # a timeout is not an error of the run
        assert "2 × timeout: the episode ran past --episode-timeout 0.5s" in slow.out
        assert "--retry-errors=timeout" in slow.out
        status = cli(capsys, "status", str(out))
        assert status.code == 0 and "timed-out ones too:" in status.out
        plain = cli(capsys, *args, "--retry-errors")
        assert "ran 0 episodes" in plain.out
        server.default = Reply(body=CHAT_OK)
        done = cli(capsys, *args, "--retry-errors=timeout")
    assert done.code == 0 and "ran 2 episodes (2 errored cells set aside" in done.out
    assert {r["outcome"]["termination"] for r in records(out)} == {"finished"}


@pytest.mark.parametrize("given", ["default", "timeouts"])
def test_retry_errors_takes_no_other_value(capsys, given: str) -> None:
    result = cli(capsys, "run", "--retry-errors", given)
    assert result.code == 2 and "--retry-errors takes no value" in result.err


def test_a_crash_between_the_two_steps_counts_each_record_once(capsys, tmp_path) -> None:
    """The records are appended to superseded.jsonl and synced first; then the records file is
    rewritten without them. Make the rewrite fail for real (its temporary file's name is taken
    by a directory): the record is then in both files, and every reader still counts it once,
    since readers read only episodes*.jsonl; the next retry sets it aside again."""
    out = tmp_path / "run"
    with BadServer(BOOM) as server:
        args = ["run", *GRID, "--model", _model(server), "--out", str(out)]
        assert cli(capsys, *args).code == 1
        before = (out / "episodes.jsonl").read_bytes()
        temp_name(out / "episodes.jsonl").mkdir()  # the rewrite cannot create its temp file
        errored = list(scan(out).errored.values())
        with pytest.raises(Exception, match="cannot rewrite"):
            supersede(out, errored)
        assert (out / "episodes.jsonl").read_bytes() == before  # untouched
        assert len((out / SUPERSEDED).read_text().splitlines()) == CELLS  # the first step
        assert len({r["episode_id"] for r in iter_records(out)}) == CELLS == len(scan(out).ids)
        status = cli(capsys, "status", str(out), "--json")
        assert json.loads(status.out)["done"] == CELLS

        temp_name(out / "episodes.jsonl").rmdir()
        server.respond = acting()
        assert cli(capsys, *args, "--retry-errors").code == 0
    got = records(out)
    assert len(got) == CELLS
    assert len((out / SUPERSEDED).read_text().splitlines()) == 2 * CELLS  # history, twice
    assert _episodes_in_table3(capsys, out) == sum(r["outcome"]["fault_fired"] for r in got)


def test_a_shard_retries_only_its_own_cells(capsys, tmp_path) -> None:
    out = tmp_path / "run"
    with BadServer(BOOM) as server:
        base = ["run", *GRID, "--model", _model(server), "--out", str(out)]
        for shard in ("1/2", "2/2"):
            assert cli(capsys, *base, "--shard", shard).code == 1
        mine = {r["episode_id"] for r in iter_records(out)
                if r["episode_id"] in scan(out).ids}
        server.default = Reply(body=CHAT_OK)
        first = cli(capsys, *base, "--shard", "1/2", "--retry-errors")
    got = records(out)
    assert len(got) == len(mine) == CELLS
    shard_one = [json.loads(line) for line in
                 (out / "episodes.shard-1-of-2.jsonl").read_text().splitlines()]
    shard_two = [json.loads(line) for line in
                 (out / "episodes.shard-2-of-2.jsonl").read_text().splitlines()]
    assert {r["outcome"]["termination"] for r in shard_one} == {"finished"}
    assert {r["outcome"]["termination"] for r in shard_two} == {"model_error"}
    assert first.code == 0  # this shard is complete
    assert cli(capsys, "status", str(out)).code == 1  # the other shard's errored cells remain
