"""Wall-clock facts about a run: the only place outside the CLI that reads real time.

What lands here goes into the record's ``runtime`` field, the one field allowed to differ
between two runs of the same cell.
"""

from __future__ import annotations

import functools
import platform
import sys
import time
from typing import Any


def stopwatch() -> float:
    """A monotonic wall-clock reading, for durations."""
    return time.perf_counter()


@functools.cache
def _facts() -> tuple[tuple[str, Any], ...]:
    return (("host", platform.node()), ("python", sys.version.split()[0]),
            ("platform", sys.platform))


def host_facts() -> dict[str, Any]:
    """Where this process runs (read once: it does not change under a running process)."""
    return dict(_facts())


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pause(seconds: float) -> None:
    """A real wait, for polling outside the simulation (a lock held by another process)."""
    time.sleep(seconds)
