"""Readers of records keep to the closed sets and the version policy (docs/records.md): a
termination or event type outside its set is reported by every reader, a record of another
schema version is refused on one line and never quarantined, and a writer cannot emit an
event the schema would refuse."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import simpy
from conftest import cell_for
from support.hostile import cli, records, refused

from limbo.analysis.loader import load
from limbo.base.errors import InfraError
from limbo.commands.common import builtin_design
from limbo.episode.harness import LoopResult
from limbo.episode.run_one import arun_episode
from limbo.harnesses.minimal import MinimalHarness
from limbo.log.reader import READABLE, RecordError
from limbo.sim.events import EventLog

GRID = ["--template", "charge_invoice", "--model", "policy/verify", "--fault", "timeout_post"]


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> list[str]:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("reference")
    assert main(["run", *GRID, "--out", str(out), "--quiet"]) == 0
    return (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()


def _edited(line: str, how: str, episode_id: str = "ep-edited") -> str:
    record = json.loads(line)
    record["episode_id"] = episode_id
    if how == "termination":
        record["outcome"]["termination"] = "crashed"
    elif how == "event":
        record["events"][1]["type"] = "teleport"
    else:
        record["schema"] = "limbo.episode/9"
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def _run_dir(tmp_path: Path, lines: list[str], *extra: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "episodes.jsonl").write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    return run


@pytest.mark.parametrize(("how", "reason"), [
    ("termination", "outcome.termination 'crashed' is not one of finished"),
    ("event", "events[1] has unknown type 'teleport'"),
])
def test_a_record_outside_the_closed_sets_is_reported_by_status_and_show(
        capsys, tmp_path, lines, how, reason) -> None:
    run = _run_dir(tmp_path, lines, _edited(lines[0], how))
    status = cli(capsys, "status", str(run))
    assert status.code == 1 and f"episodes.jsonl line {len(lines) + 1}: {reason}" in status.out
    refused(cli(capsys, "show", str(run), "ep-edited"),
            f"episode ep-edited in {run} is not a valid record (episodes.jsonl line "
            f"{len(lines) + 1}: {reason}")


def test_a_writer_quarantines_such_a_record_and_runs_the_cell_again(capsys, tmp_path,
                                                                    lines) -> None:
    run = _run_dir(tmp_path, lines[1:], _edited(lines[0], "event",
                                                json.loads(lines[0])["episode_id"]))
    result = cli(capsys, "run", *GRID, "--out", str(run), "--quiet")
    assert result.code == 0, result.err
    quarantined = json.loads((run / "quarantine.jsonl").read_text())
    assert quarantined["reason"] == "events[1] has unknown type 'teleport'"
    again = sorted(records(run), key=lambda r: r["episode_id"])
    assert again == sorted(map(_without_runtime, lines), key=lambda r: r["episode_id"])


def _without_runtime(line: str) -> dict:
    record = json.loads(line)
    del record["runtime"]
    return record


def test_a_record_of_another_version_is_refused_in_one_line_and_left_alone(capsys, tmp_path,
                                                                          lines) -> None:
    run = _run_dir(tmp_path, lines, _edited(lines[0], "version"))
    before = (run / "episodes.jsonl").read_bytes()
    needle = (f"episodes.jsonl line {len(lines) + 1}: episode ep-edited: schema "
              f"'limbo.episode/9' is not one this LIMBO reads ({', '.join(READABLE)})")
    refused(cli(capsys, "status", str(run)), needle)
    refused(cli(capsys, "run", *GRID, "--out", str(run), "--quiet"), needle)
    refused(cli(capsys, "show", str(run), "ep-edited"), needle)
    assert (run / "episodes.jsonl").read_bytes() == before
    assert not (run / "quarantine.jsonl").exists()


def test_the_analysis_reports_a_termination_outside_the_set(tmp_path, lines) -> None:
    run = _run_dir(tmp_path, lines, _edited(lines[0], "termination"))
    loaded = load([run], builtin_design)
    assert len(loaded.frame) == len(lines)
    (problem,) = [p for p in loaded.problems if p.kind != "no design"]  # no manifest here
    assert problem.kind == "invalid record" and problem.where.endswith(f":{len(lines) + 1}")
    assert "outcome.termination 'crashed' is not one of finished" in problem.detail


def test_the_analysis_stops_on_an_unknown_event_type_with_where_it_is(tmp_path, lines) -> None:
    run = _run_dir(tmp_path, lines, _edited(lines[0], "event"))
    loaded = load([run], builtin_design)
    first = loaded.each_events(loaded.frame.iloc[:-1], lambda i, events: list(events))
    assert len(first) == len(lines)
    with pytest.raises(RecordError, match=rf"episodes.jsonl:{len(lines) + 1}: events\[1\] has "
                                          r"unknown type 'teleport'"):
        loaded.each_events(loaded.frame, lambda i, events: list(events))


# -- writers ------------------------------------------------------------------------------------


def test_emit_refuses_an_unknown_type_and_fields_its_model_does_not_have() -> None:
    log = EventLog(simpy.Environment())
    with pytest.raises(InfraError, match="unknown event type 'teleport'"):
        log.emit("teleport", to="mars")
    with pytest.raises(InfraError, match=r"clock event with fields \['reason'\]"):
        log.emit("clock", reason="wait")
    with pytest.raises(InfraError, match="limbo.sim.events.Clock needs"):
        log.emit("clock", reason="wait", seconds=1.0, mood="bored")
    log.emit("clock", reason="wait", seconds=1.0)
    log.emit("condition", name="mine", action="noted", anything={"a": 1})  # open by design
    assert [e["type"] for e in log.events] == ["clock", "condition"]


class Crashes(MinimalHarness):
    """A harness that reports a termination outside the closed set."""

    async def run(self) -> LoopResult:
        return LoopResult(termination="crashed")  # type: ignore[arg-type]


class Teleports(MinimalHarness):
    """A harness that logs an event type outside the closed set."""

    async def run(self) -> LoopResult:
        self.world.log.emit("teleport")
        return await super().run()


@pytest.mark.parametrize(("driver", "needle"), [
    (Crashes, "ended with termination 'crashed', not one of finished"),
    (Teleports, "unknown event type 'teleport'"),
])
def test_a_harness_outside_the_closed_sets_ends_as_an_infra_error(driver, needle) -> None:
    record = asyncio.run(arun_episode(cell_for("charge_invoice"), make_harness=driver))
    assert record["outcome"]["termination"] == "infra_error"
    assert needle in record["outcome"]["termination_reason"]
    assert {e["type"] for e in record["events"]} <= {"turn", "call", "result", "limit",
                                                      "commit", "finish", "clock"}
