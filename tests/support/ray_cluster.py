"""A real Ray cluster on 127.0.0.1 for the tests and the Ray benchmark: a head and extra
nodes, each a ``ray start --block`` in a process group of its own, so that the node's raylet,
its agents and its worker processes all die with one ``killpg`` — SIGKILL to lose a node the
hard way, SIGTERM (then SIGKILL) to tear down. Nothing else on the machine is touched: no
``ray stop``, which would stop every Ray process of the machine.

Every port that Ray would otherwise take at a fixed default is chosen free, and the session
lives in a short temporary directory of its own (Ray's socket paths must stay under 108 bytes).
A node also ends when the process that started it dies without tearing it down (a test killed
by a timeout, a Ctrl-C between two fixtures): the kernel sends it SIGTERM (``PR_SET_PDEATHSIG``),
and ``ray start --block`` stops its raylet and workers as it would on ``stop``. Without this, a
head outlived its test run and kept a core busy under the next one.

Drivers reach the head at 127.0.0.1; each node registers under this machine's own routable
address when it has one: ``ray start`` swaps a loopback ``--node-ip-address`` for it, so that
other machines could reach the node. Either way the traffic never leaves this machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")
READY = "Ray runtime started"
# A killed node is declared dead after about 2 s instead of about 30 s; worker processes run
# at the priority of the rest (Ray nices them to 15 by default: on a shared two-core machine
# they would lose every CPU contest to the local runs they are compared with); a node starts
# up to four worker processes at once, not one per CPU (Ray's default): with one CPU, the
# head would start the limiter's process and then its episode worker's, one after the other
# (docs/scale.md tells users to set the same).
CONFIG = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
          "RAY_health_check_failure_threshold": "4", "RAY_worker_niceness": "0",
          "RAY_worker_maximum_startup_concurrency": "4"}


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Run in the child between fork and exec: SIGTERM when the starting process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc, self.log = proc, log

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(3)
        except subprocess.TimeoutExpired:
            pass
        self.kill(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


class Cluster:
    """``with Cluster() as c:`` a head (``c.address``) and ``extra`` more nodes."""

    def __init__(self, cpus: int = 1, extra: int = 1, memory_mb: int = 150) -> None:
        self.cpus, self.extra, self.memory = cpus, extra, memory_mb * 1_000_000
        self.dir = Path(tempfile.mkdtemp(prefix="limbo-ray-", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.head: Node | None = None
        self.nodes: list[Node] = []

    def _start(self, name: str, args: list[str]) -> Node:
        log = self.dir / f"{name}.log"
        env = {**os.environ, **CONFIG, "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        argv = [RAY, "start", "--block", "--node-ip-address", "127.0.0.1",
                "--num-cpus", str(self.cpus), "--object-store-memory", str(self.memory),
                "--disable-usage-stats", "--dashboard-agent-listen-port", str(free_port()),
                "--metrics-export-port", str(free_port()), *args]
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.dir, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        node = Node(proc, log)
        deadline = time.monotonic() + 90
        while READY not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                node.stop()
                raise RuntimeError(f"ray start {name} failed:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        return node

    def start_head(self) -> None:
        self.head = self._start("head", [
            "--head", "--port", str(self.port), "--include-dashboard=false",
            "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port()),
            "--temp-dir", str(self.dir / "t")])

    def add_node(self) -> Node:
        node = self._start(f"node{len(self.nodes) + 1}", ["--address", self.address])
        self.nodes.append(node)
        return node

    def __enter__(self) -> Cluster:
        try:
            self.start_head()
            for _ in range(self.extra):
                self.add_node()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        for node in [*self.nodes, *([self.head] if self.head else [])]:
            node.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def cluster(cpus: int = 1, extra: int = 1) -> Iterator[Cluster]:
    with Cluster(cpus, extra) as c:
        yield c
