"""Must-show 3 of issue 16: ``limbo check`` as a CI gate, with JUnit XML read back by an
independent parser (junitparser), and ``limbo run`` gating its own run with the same flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml

from limbo.cli import main
from limbo.log.store import iter_records

FAULTS = ("timeout_post", "http500_post", "conn_reset_post", "timeout_pre", "redelivery")
RESOLVES = {"timeout_post", "http500_post", "conn_reset_post"}


def run_args(out: Path, model: str, *extra: str) -> list[str]:
    argv = ["run", "e1", "--model", model, "--instances", "1", "--out", str(out), "--quiet",
            "--template", "charge_invoice", "--template", "record_signup"]
    for fault in FAULTS:
        argv += ["--fault", fault]
    return [*argv, *extra]


@pytest.fixture(scope="module")
def blind(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("blind")
    assert main(run_args(out, "policy/blind")) == 0
    return out


def duplicates(run: Path, faults: set[str]) -> list[dict]:
    return [r for r in iter_records(run) if r["cell"]["fault"] in faults
            and r["outcome"]["fault_fired"] and r["outcome"]["duplicate"]]


def test_blind_fails_the_gate_where_a_read_back_resolves(blind: Path, tmp_path: Path,
                                                         capsys) -> None:
    junit = tmp_path / "reports" / "limbo.xml"
    code = main(["check", str(blind), "--max-dup", "0", "--family", "read-back-resolves",
                 "--junit", str(junit)])
    assert code == 1
    dups = duplicates(blind, RESOLVES)
    assert len(dups) == 12  # 2 templates x 2 focal writes x 3 faults, blind re-issues each
    printed = capsys.readouterr().out
    assert printed.count("duplicate: limbo show") == 5  # the terminal shows a few, JUnit all
    assert f"... and 7 more failing episodes (listed in {junit})" in printed
    xml = JUnitXml.fromfile(str(junit))
    cases = [case for suite in xml for case in suite]
    failed = [c for c in cases if any(isinstance(r, Failure) for r in c.result)]
    assert len(failed) == len(cases) == 1 + len(dups)  # the family, and each duplicate
    texts = "\n".join(r.text or "" for c in failed for r in c.result)
    for record in dups:
        assert f"limbo show {blind} {record['episode_id']}" in texts
    family = next(c for c in failed if c.name.startswith("read-back resolves: duplicate rate"))
    assert "100.0% (12/12 rated episodes) > 0" in family.result[0].message
    # the show command in the failure text works
    capsys.readouterr()
    assert main(["show", str(blind), dups[0]["episode_id"]]) == 0


def test_keyed_under_keys_everywhere_passes(tmp_path: Path) -> None:
    out, junit = tmp_path / "keyed", tmp_path / "keyed.xml"
    code = main(run_args(out, "policy/keyed", "--contract", "keys-everywhere", "--max-dup",
                         "0", "--family", "read-back-resolves", "--junit", str(junit)))
    assert code == 0
    assert main(["check", str(out), "--max-dup", "0", "--family", "read-back-resolves"]) == 0
    xml = JUnitXml.fromfile(str(junit))
    cases = [case for suite in xml for case in suite]
    assert cases and not any(c.result for c in cases)
    assert xml.failures == 0 and xml.errors == 0


def test_run_gates_what_it_ran_and_the_rate_threshold_is_a_rate(blind: Path) -> None:
    # blind duplicates every read-back-cannot (redelivery) cell and every resolvable one:
    # 12 of 16 rated episodes outside "not executed" are duplicates.
    assert main(["check", str(blind), "--max-dup", "0.5"]) == 1
    assert main(["check", str(blind), "--max-dup", "1"]) == 0
    assert main(["check", str(blind), "--min-eos", "0", "--family", "not-executed"]) == 0
    assert main(["check", str(blind), "--min-eos", "1", "--family", "not executed"]) == 0
    assert main(["check", str(blind), "--min-eos", "1", "--family", "read-back-cannot"]) == 1


def test_nothing_measured_fails_the_gate(blind: Path, tmp_path: Path) -> None:
    # a family the run does not hold, and an arm whose fault never fired
    assert main(["check", str(blind), "--max-dup", "0", "--family", "late-commit"]) == 1
    gave_up = tmp_path / "none"
    assert main(["run", "e1", "--model", "policy/verify", "--fault", "none", "--instances", "1",
                 "--template", "charge_invoice", "--out", str(gave_up), "--quiet"]) == 0
    assert main(["check", str(gave_up), "--max-dup", "0"]) == 1  # no family at all


def test_errored_episodes_are_junit_errors_and_fail(blind: Path, tmp_path: Path) -> None:
    lines = (blind / "episodes.jsonl").read_text().splitlines()
    broken = tmp_path / "broken"
    broken.mkdir()
    records = [json.loads(line) for line in lines]
    target = next(r for r in records if r["cell"]["fault"] == "timeout_pre")
    target["outcome"]["termination"] = "model_error"
    (broken / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    junit = tmp_path / "errors.xml"
    code = main(["check", str(broken), "--max-dup", "0", "--min-eos", "0",
                 "--family", "not-executed", "--junit", str(junit)])
    assert code == 1
    cases = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    errors = [c for c in cases if any(isinstance(r, Error) for r in c.result)]
    assert len(errors) == 1 and target["episode_id"] in errors[0].name  # once, not per threshold


@pytest.mark.parametrize("argv, message", [
    (["--max-dup", "1.5"], "between 0 and 1"),
    (["--max-dup", "nan"], "between 0 and 1"),
    (["--min-eos", "abc"], "between 0 and 1"),
    (["--family", "read-back-resolves"], "need a threshold"),
    ([], "name a threshold"),
    (["--max-dup", "0", "--family", "sometimes"], "not a fault family"),
])
def test_bad_gate_flags_are_one_line_errors(blind: Path, argv: list[str], message: str,
                                            capsys) -> None:
    assert main(["check", str(blind), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_flags_on_run_write_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "never"
    assert main(run_args(out, "policy/blind", "--max-dup", "2")) == 2
    assert not out.exists()
    assert main(["check", str(tmp_path), "--max-dup", "0"]) == 2  # no records: one line
    assert "no episode records" in capsys.readouterr().err


def test_junit_path_that_is_a_directory(blind: Path, tmp_path: Path, capsys) -> None:
    assert main(["check", str(blind), "--max-dup", "0", "--junit", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
