"""The processes this one started that are still there (running or unreaped): a test of work
done in forked helpers checks that none is left behind."""

from __future__ import annotations

import os
from pathlib import Path


def children() -> list[int]:
    """The pids whose parent is this process, from ``/proc`` (Linux)."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone since it was listed
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.append(int(entry.name))
    return found
