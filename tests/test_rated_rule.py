"""One rated rule: every reader of records — ``limbo run``'s summary, ``limbo status``, ``limbo
check``, the analysis loader (``limbo tables``) and the Inspect scorer — counts the same
episodes as rated and the same as errored.

A real run whose models fail each way a run can (``model_error``, ``infra_error``, ``timeout``,
from a plugin of failing adapters) read by every command; and every termination, with the
fault fired or not, through each reader, against the table in docs/metrics.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from limbo.sim.events import TERMINATIONS

ROOT = Path(__file__).resolve().parents[1]
LIMBO = str(Path(sys.executable).parent / "limbo")
PLUGIN = str(ROOT / "tests" / "support" / "trouble.py")
GRID = """name = "e1"
description = "E1-shaped: two reference policies and three models that fail"
models = ["policy/verify", "policy/give-up", "trouble/model-error", "trouble/crash",
          "trouble/slow"]
contracts = ["native"]
faults = ["none", "timeout_post", "timeout_pre"]
templates = ["charge_invoice"]
focal_writes = "first"
"""


def limbo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def trouble_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("rated")
    (root / "grid.toml").write_text(GRID)
    done = limbo("run", str(root / "grid.toml"), "--out", str(root / "run"), "--plugin",
                 PLUGIN, "--episode-timeout", "1")
    assert done.returncode == 1, done.stderr  # errored cells remain: the run says so (runs.md)
    return root / "run", done.stdout


def test_every_command_reports_the_same_rated_and_errored_counts(trouble_run) -> None:
    run, summary = trouble_run
    terminations = [json.loads(line)["outcome"]["termination"]
                    for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert {t: terminations.count(t) for t in ("model_error", "infra_error", "timeout")} == {
        "model_error": 3, "infra_error": 3, "timeout": 3}
    rated, errored = 6, 9

    row = next(line for line in summary.splitlines() if re.match(r"\W*all\b", line.strip("│ ")))
    cells = [c.strip() for c in row.strip().strip("│").split("│")]
    assert (int(cells[1]), int(cells[2]), int(cells[-1])) == (15, rated, errored)

    status = json.loads(limbo("status", str(run), "--json").stdout)
    assert (status["rated"], sum(status["errored"].values())) == (rated, errored)

    check = limbo("check", str(run), "--max-dup", "1", "--plugin", PLUGIN)
    assert check.returncode == 1  # errored episodes fail the gate
    assert f"{rated} rated, {errored} errored" in check.stdout.splitlines()[-1]
    assert check.stdout.count("ERR  ") == 5 and "and 4 more errored episodes" in check.stdout

    tables = limbo("tables", str(run), "--table", "3", "--format", "csv", "--plugin", PLUGIN)
    assert tables.returncode == 0, tables.stderr
    assert (f"loaded 15 episodes from 1 run(s): {rated} rated, {errored} errored (infra_error "
            f"3, model_error 3, timeout 3)") in tables.stderr
    assert f"15 episodes; excluded from rates: {errored} errored" in tables.stdout
    assert f'3,all models,episodes,{rated},' in tables.stdout


def _records(run: Path) -> list[dict]:
    """One record per (termination, fault fired): a real record with its ending rewritten."""
    base = json.loads((run / "episodes.jsonl").read_text().splitlines()[0])
    out = []
    for termination in TERMINATIONS:
        for fired in (True, False):
            record = json.loads(json.dumps(base))
            record["episode_id"] = f"ep-{termination}-{fired}"
            record["outcome"].update(termination=termination, fault_fired=fired)
            out.append(record)
    return out


def _documented() -> dict[str, tuple[bool, bool]]:
    """docs/metrics.md's table: termination → (errored, rated when the fault fired)."""
    text = (ROOT / "docs" / "metrics.md").read_text().split("## Which episodes are rated")[1]
    rows = re.findall(r"^\| `(\w+)` \| (yes|no) \| (yes|no) \|$", text, re.M)
    return {t: (e == "yes", r == "yes") for t, e, r in rows}


def test_every_termination_reads_the_same_everywhere(trouble_run, tmp_path: Path) -> None:
    from limbo.analysis.gate import Thresholds, evaluate
    from limbo.analysis.loader import load
    from limbo.log.store import iter_tallied, scan
    from limbo.run.summary import Summary

    records = _records(trouble_run[0])
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "manifest.json").write_bytes((trouble_run[0] / "manifest.json").read_bytes())
    documented = _documented()
    assert set(documented) == set(TERMINATIONS)
    expected = {r["episode_id"]: r["outcome"]["fault_fired"] and
                not documented[r["outcome"]["termination"]][0] for r in records}
    errored = {r["episode_id"] for r in records if documented[r["outcome"]["termination"]][0]}
    assert all(documented[t][1] == (not documented[t][0]) for t in TERMINATIONS)

    summary = Summary.of(iter_tallied(tmp_path))  # what a resumed run prints
    assert not summary.uncounted
    assert (summary.total.rated, summary.total.errors) == (sum(expected.values()), len(errored))
    found = scan(tmp_path)
    assert found.rated == sum(expected.values())
    frame = load([tmp_path]).frame.set_index("episode_id")
    assert frame["rated"].to_dict() == expected
    assert set(frame.index[frame["error"]]) == errored
    verdict = evaluate(load([tmp_path]), Thresholds(max_dup=1.0))
    assert verdict.rated == sum(expected.values())
    assert {e.episode_id for e in verdict.errors} == errored


def test_the_inspect_scorer_rates_the_same_episodes(trouble_run) -> None:
    pytest.importorskip("inspect_ai")
    from limbo.inspect.task import ledger
    from limbo.log.inspect_logs import RECORD_KEY

    score = ledger()
    documented = _documented()
    for record in _records(trouble_run[0]):
        state = SimpleNamespace(metadata={RECORD_KEY: record})
        value = asyncio.run(score(state, None)).value  # type: ignore[arg-type]
        counted = record["outcome"]["fault_fired"] and not documented[
            record["outcome"]["termination"]][0]
        assert (value["duplicate"] == value["duplicate"]) is counted, record["episode_id"]
