"""The test suite's Ray cluster (tests/support/ray_cluster.py) does not outlive the process that
started it: a test process killed before its teardown (a timeout, a SIGKILL) leaves no
``ray start`` head running on the machine to slow down every later test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

TESTS = Path(__file__).resolve().parent

STARTER = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from support.ray_cluster import Cluster
c = Cluster(cpus=1, extra=0)
c.start_head()
print(c.head.proc.pid, c.dir, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"  # a zombie has ended; only its exit status waits to be read


def test_a_head_ends_when_the_process_that_started_it_is_killed() -> None:
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(TESTS)],
                               stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    pid, folder = starter.stdout.readline().split()
    head = int(pid)
    assert alive(head)
    starter.send_signal(signal.SIGKILL)  # no teardown runs: no close(), no atexit
    starter.wait(10)
    deadline = time.monotonic() + 90  # ray start drains for up to 30 s on SIGTERM
    while alive(head) and time.monotonic() < deadline:
        time.sleep(0.5)
    outlived = alive(head)
    if outlived:
        os.killpg(head, signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)  # the killed process's teardown would have
    if outlived:
        pytest.fail(f"the head (pid {head}) outlived the process that started it")
