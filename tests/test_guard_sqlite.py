"""The durable key store, across real processes: a guard killed with SIGKILL never gets its
write executed twice, and processes racing on one key execute it once.

Each process is a real Python interpreter running the guard on a shared SQLite file; the
write's side effect is a line appended to a file, so "executed twice" is counted outside any
guard or store.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from limbo.harnesses.guard import SQLiteKeyStore

WORKER = r'''
import json, os, sys, time
from limbo.harnesses.guard import Guard, SQLiteKeyStore, Tool, Verification

db, effects, mode, now = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

def executed():
    if not os.path.exists(effects):
        return []
    with open(effects) as f:
        return [json.loads(line) for line in f if line.strip()]

def charge(customer: str, amount_cents: int) -> dict:
    with open(effects, "a") as f:
        f.write(json.dumps([customer, amount_cents, os.getpid()]) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if mode == "die-in-write":
        print("WRITING", flush=True)
        time.sleep(600)
    if mode == "slow":
        time.sleep(0.5)
    return {"charged": amount_cents, "by": os.getpid()}

def verify(args: dict) -> Verification:
    hits = [e for e in executed() if e[:2] == [args["customer"], args["amount_cents"]]]
    return Verification(bool(hits), {"charged": args["amount_cents"], "by": hits[0][2]} if hits else None)

def block() -> None:
    print("BLOCKING", flush=True)
    time.sleep(600)

guard = Guard([Tool("charge", charge, write=True, verify=verify), Tool("block", block)],
              authorize=lambda caller, tool, args: caller == "alice",
              store=SQLiteKeyStore(db, lease_s=60.0), clock=lambda: now)
res = guard.call_sync("alice", "charge", {"customer": "cus_1", "amount_cents": 4200})
r = res.receipt
print(json.dumps({"ok": res.ok, "value": res.value, "error": res.error and res.error.kind,
                  "replayed": r and r.replayed, "verified": r and r.verified}), flush=True)
if mode == "die-after-write":
    guard.call_sync("alice", "block", {})
'''


_LINES: dict[int, queue.Queue[str]] = {}


def _start(tmp: Path, mode: str, now: float = 0.0) -> subprocess.Popen[str]:
    script = tmp / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp / "keys.db"),
                             str(tmp / "effects.jsonl"), mode, str(now)],
                            stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    _LINES[proc.pid] = lines
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    return proc


def _line(proc: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    """The worker's next line of output (a hung worker fails the test, not the run)."""
    try:
        return _LINES[proc.pid].get(timeout=timeout_s).strip()
    except queue.Empty:
        proc.kill()
        raise AssertionError("worker printed nothing") from None


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out = json.loads(_line(proc))
    assert proc.wait(timeout=60) == 0
    return out


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def _effects(tmp: Path) -> list[Any]:
    return [json.loads(x) for x in (tmp / "effects.jsonl").read_text().splitlines() if x]


def test_a_key_recorded_before_a_kill_is_replayed_by_a_new_process(tmp_path: Path) -> None:
    first = _start(tmp_path, "die-after-write")
    result = json.loads(_line(first))
    assert result["ok"] and not result["replayed"]
    assert _line(first) == "BLOCKING"  # mid-run, after the write
    _kill(first)
    again = _finish(_start(tmp_path, "normal"))
    assert again["ok"] and again["replayed"]
    assert again["value"] == result["value"]  # the first process's receipt, from disk
    assert len(_effects(tmp_path)) == 1


def test_a_write_interrupted_by_a_kill_is_never_executed_twice(tmp_path: Path) -> None:
    first = _start(tmp_path, "die-in-write", now=0.0)
    assert _line(first) == "WRITING"  # the effect is on disk, the guard never heard back
    _kill(first)
    # within the claim's lease nobody can know the outcome: refuse rather than repeat
    waiting = _finish(_start(tmp_path, "normal", now=10.0))
    assert not waiting["ok"] and waiting["error"] == "in_progress"
    # past the lease the claim is taken over as an ambiguous attempt: read back, not re-sent
    later = _finish(_start(tmp_path, "normal", now=1000.0))
    assert later["ok"] and later["replayed"] and later["verified"]
    assert later["value"]["by"] == first.pid
    assert len(_effects(tmp_path)) == 1


def test_processes_racing_on_one_key_execute_it_once(tmp_path: Path) -> None:
    procs = [_start(tmp_path, "slow") for _ in range(3)]
    results = [_finish(p) for p in procs]
    assert len(_effects(tmp_path)) == 1
    executed = [r for r in results if r["ok"] and not r["replayed"]]
    assert len(executed) == 1
    assert all(r["replayed"] or r["error"] == "in_progress" for r in results if r not in executed)


def test_concurrent_claims_through_separate_connections_have_one_winner(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    stores = [SQLiteKeyStore(db) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    verdicts: list[str] = []

    def claim(store: SQLiteKeyStore) -> None:
        barrier.wait()
        verdicts.append(store.claim("alice", "k", "charge", "fp", None).verdict)

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(verdicts) == ["busy"] * 7 + ["new"]
    stores[0].complete("alice", "k", {"id": 1})
    assert stores[5].claim("alice", "k", "charge", "fp", None).value == {"id": 1}
    assert stores[6].claim("alice", "k", "charge", "other", None).verdict == "conflict"
    for s in stores:
        s.close()
