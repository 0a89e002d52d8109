"""``limbo conform`` as a user meets it: with nothing to see effects through, its effect
verdicts are ``unknown`` (never ``pass``); a ``--probe`` sees what the world file's reads see;
``--dry-run`` calls nothing; a tool left out of ``--tool`` is never called; ``--require`` and
``--junit`` gate CI; a remote server, a used ``--out`` and a probe printing prose are refused or
said, not guessed around; ``limbo show`` draws a check."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from support.conform_runs import LIMBO, SCALE, WORLD, conform, probe, rows, stdio
from test_conform_gallery import BROKEN, baseline


def test_without_reads_or_a_probe_every_effect_verdict_is_unknown(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    done = conform(tmp_path / "run", *stdio("correct", db), "--time-scale", SCALE,
                   "--require", "1", "--junit", str(tmp_path / "j.xml"))
    assert done.code == 1, done.stderr  # a required property that nothing shows holds
    found = done.verdicts()
    assert {v["verdict"] for v in found.values()} == {"unknown", "not_applicable"}
    for v in found.values():
        assert v["source"] == "annotations" and v["arguments_from"] == "input schema"
        if v["verdict"] == "unknown":
            assert "no --probe" in v["why"] and v["effects"] is None, v
    assert found[("create_charge", 1)]["verdict"] == "unknown"
    assert sum(rows(db).values()) > 0  # the calls were made: only their effects went unseen
    failures = ET.parse(tmp_path / "j.xml").getroot().iter("failure")
    assert sorted(f.get("type") for f in failures) == ["unknown", "unknown"]


def test_without_an_observer_the_answers_alone_still_fail_what_they_show(tmp_path: Path) -> None:
    done = conform(tmp_path / "run", *stdio("ignores_keys", tmp_path / "g.db"), "--tool",
                   "create_charge", "--property", "1,2,6")
    found = {p: v for (_, p), v in done.verdicts().items()}
    assert found[1]["verdict"] == "fail" and "answered differently" in found[1]["why"]
    assert found[2]["verdict"] == "fail" and "with a success" in found[2]["why"]
    assert found[6]["verdict"] == "unknown"


def test_a_probe_sees_what_the_declared_reads_see(tmp_path: Path) -> None:
    for flavour in ("correct", "ignores_keys"):
        db = tmp_path / f"{flavour}.db"
        done = conform(tmp_path / flavour, *stdio(flavour, db), *probe(db), "--time-scale",
                       SCALE)
        assert done.code == 0, done.stderr
        got = {k: (v["verdict"], v["effects"]) for k, v in done.verdicts().items()}
        assert got == baseline() | BROKEN[flavour]
        assert sum(v["effects"] or 0 for v in done.report["verdicts"]) == sum(rows(db).values())


def test_a_dry_run_calls_nothing_and_says_how_many_calls_it_would_make(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    done = conform(tmp_path / "run", *stdio("correct", db), "--world", str(WORLD), "--dry-run")
    assert done.code == 0, done.stderr
    assert "at most 40 call(s), 34 of them to tools that may write" in done.stderr
    assert "dry run: none is made" in done.stderr
    assert "create_charge  1 replay" in done.stdout and "planned" in done.stdout
    listed = conform(tmp_path / "run", *stdio("correct", db), "--dry-run", "--json")
    report = json.loads(listed.stdout)
    assert report["schema"] == "limbo.conform/1" and report["planned_calls"] == 40
    assert {v["verdict"] for v in report["verdicts"]} == {"planned", "not_applicable"}
    assert rows(db) == {"charges": 0, "emails": 0}
    assert not (tmp_path / "run").exists()


def test_a_tool_left_out_of_tool_is_never_called(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    done = conform(tmp_path / "run", *stdio("correct", db), *probe(db), "--tool",
                   "create_charge", "--time-scale", SCALE)
    assert done.code == 0, done.stderr
    assert {t for t, _ in done.verdicts()} == {"create_charge"}
    assert done.verdicts()[("create_charge", 8)]["verdict"] == "not_applicable"
    assert rows(db)["emails"] == 0
    called = {e["tool"] for r in done.records().values() for e in r["events"]
              if e["type"] == "call"}
    assert called == {"conform_create_charge"}


def test_require_and_junit_gate_a_ci_job(tmp_path: Path) -> None:
    db, report = tmp_path / "g.db", tmp_path / "reports" / "conform.xml"
    args = [*stdio("ignores_keys", db), "--world", str(WORLD), "--tool", "create_charge",
            "--property", "1,6", "--junit", str(report)]
    done = conform(tmp_path / "a", *args, "--require", "1")
    assert done.code == 1, done.stderr
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")}
    assert cases["1 replay"].find("failure") is not None
    assert cases["6 blind_retry"].find("failure") is None
    assert "--tool create_charge --property 1" in cases["1 replay"].find("failure").text
    assert conform(tmp_path / "b", *args, "--require", "6").code == 0


def test_what_is_refused_is_said_in_one_line(tmp_path: Path) -> None:
    remote = conform(tmp_path / "r", "--upstream-url", "http://example.com/mcp")
    assert remote.code == 2 and "--allow-remote" in remote.stderr, remote.stderr
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("x")
    taken = conform(used, *stdio("correct", tmp_path / "g.db"))
    assert taken.code == 2 and "is not empty" in taken.stderr
    both = conform(tmp_path / "b", *stdio("correct", tmp_path / "g.db"), "--upstream-url",
                   "http://127.0.0.1:1/mcp")
    assert both.code == 2 and "exactly one of" in both.stderr
    bad = conform(tmp_path / "p", *stdio("correct", tmp_path / "g.db"), "--property", "9")
    assert bad.code == 2 and "1-8" in bad.stderr
    assert all("Traceback" not in d.stderr for d in (remote, taken, both, bad))


def test_a_probe_that_prints_prose_leaves_the_verdict_unknown(tmp_path: Path) -> None:
    done = conform(tmp_path / "run", *stdio("correct", tmp_path / "g.db"), "--probe",
                   f"{sys.executable} -c \"print('all good')\"", "--tool", "create_charge",
                   "--property", "1")
    (v,) = done.verdicts().values()
    assert v["verdict"] == "unknown" and "--probe line 1 is not JSON" in v["why"]


def test_show_draws_a_check_and_status_says_how_to_redo_a_cut_one(tmp_path: Path) -> None:
    done = conform(tmp_path / "run", *stdio("correct", tmp_path / "g.db"), "--world",
                   str(WORLD), "--tool", "create_charge", "--property", "3", "--time-scale",
                   SCALE)
    (v,) = done.verdicts().values()
    shown = subprocess.run([LIMBO, "show", str(done.out), v["episode"]], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "timeout_post" in shown.stdout and "COMMIT" in shown.stdout
    # a check cut short (its conform killed) leaves a journal and no record: limbo status
    # says to make the check again, not to recover it with limbo proxy
    (done.out / "proxy" / "ep-cut.jsonl").write_text('{"type": "intent", "n": 1}\n')
    status = subprocess.run([LIMBO, "status", str(done.out)], capture_output=True, text=True,
                            timeout=120)
    assert status.returncode == 1, status.stdout + status.stderr
    assert "run the same limbo conform command into another --out" in status.stdout
    assert "--recover" not in status.stdout


def test_a_server_that_dies_mid_call_gets_unknown_never_pass(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    done = conform(tmp_path / "run", *stdio("correct", db), *probe(db), "--tool", "send_email",
                   "--tool", "list_emails", "--time-scale", SCALE,
                   env={"GALLERY_CRASH_TOOL": "send_email"})
    assert done.code == 0, done.stderr
    found = done.verdicts()
    assert {v["verdict"] for v in found.values()} <= {"unknown", "not_applicable"}, found
    assert "did not answer" in found[("send_email", 1)]["why"]
    checked = [v for v in found.values() if v["verdict"] != "not_applicable"]
    assert sorted(v["episode"] for v in checked) == sorted(done.records())  # all recorded
    assert "Traceback" not in done.stderr


def test_a_credential_on_the_server_s_command_line_is_written_nowhere(tmp_path: Path) -> None:
    secret = "sk-conform-secret-0123456789abcdef"
    db, out, xml = tmp_path / "g.db", tmp_path / "run", tmp_path / "j.xml"
    cmd = [*stdio("ignores_keys", db)]
    cmd[1] += f" --api-key {secret}"
    done = conform(out, *cmd, *probe(db), "--tool", "create_charge", "--property", "1",
                   "--junit", str(xml))
    assert done.verdicts()[("create_charge", 1)]["verdict"] == "fail"  # it ran, and said so
    written = [done.stdout, done.stderr, xml.read_text()]
    written += [p.read_text() for p in out.rglob("*") if p.is_file()]
    assert len(written) >= 7 and not any(secret in text for text in written)
    assert "--api-key" in xml.read_text()  # the reproducer, its value masked
