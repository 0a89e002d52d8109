"""Small runs for the report tests: a slice of E1 with late commits, plus hostile records."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

SLICE = ["e1", "--model", "policy/verify", "--model", "policy/blind", "--fault", "timeout_late",
         "--fault", "timeout_post", "--fault", "none", "--template", "announce_linkedin",
         "--template", "charge_invoice", "--instances", "1", "--quiet"]
HOSTILE = '<img src="x" onerror="alert(1)"></script><script>alert(2)</script>'


def limbo(*args: str) -> subprocess.CompletedProcess:
    """The CLI in its own process (a browser driver may already run an event loop here)."""
    return subprocess.run([sys.executable, "-c", "from limbo.cli import main; "
                           "raise SystemExit(main())", *args], capture_output=True, text=True,
                          timeout=300)


def run_slice(out: Path, *extra: str) -> Path:
    done = limbo("run", *SLICE, "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr
    return out


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]


def add_hostile(run_dir: Path) -> tuple[str, str]:
    """Two records a careless page would execute: markup in the agent's text, tool arguments,
    report, an event of a type this LIMBO does not know, a harness's own event stream and an
    error reason (one ends in infra_error). Their ids."""
    base = records(run_dir)[0]
    shown = copy.deepcopy(base)
    shown["episode_id"] = "ep-hostile-" + HOSTILE
    for event in shown["events"]:
        if event["type"] == "call":
            event["args"] = {"text": HOSTILE}
        if event["type"] == "turn":
            event["text"] = HOSTILE
    shown["report"] = {"status": "completed", "summary": HOSTILE, "uncertain_actions": []}
    shown["events"].append({"t": shown["events"][-1]["t"], "type": "later_kind", "note": HOSTILE})
    shown["runtime"]["harness"] = {  # a production harness's own stream, as issue 12 records it
        "name": "CodexHarness", "version": "0.1", "exit_code": 0,
        "events": [{"type": "thread.started"}, {"type": "item.completed", "text": HOSTILE}],
        "stderr_tail": HOSTILE}
    broken = copy.deepcopy(base)
    broken["episode_id"] = "ep-hostile-error"
    broken["outcome"] = {**broken["outcome"], "termination": "infra_error",
                         "termination_reason": "RuntimeError: " + HOSTILE}
    with (run_dir / "episodes.hostile.jsonl").open("w", encoding="utf-8") as fh:
        for record in (shown, broken):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return shown["episode_id"], broken["episode_id"]
