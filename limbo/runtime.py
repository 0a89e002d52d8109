"""Wall-clock facts about a run: the only place outside the CLI that reads real time.

What lands here goes into the record's ``runtime`` field, the one field allowed to differ
between two runs of the same cell.
"""

from __future__ import annotations

import platform
import sys
import time
from typing import Any


def stopwatch() -> float:
    """A monotonic wall-clock reading, for durations."""
    return time.perf_counter()


def host_facts() -> dict[str, Any]:
    return {"host": platform.node(), "python": sys.version.split()[0], "platform": sys.platform}


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def pause(seconds: float) -> None:
    """A real wait, for polling outside the simulation (a lock held by another process)."""
    time.sleep(seconds)
