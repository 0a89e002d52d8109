"""Running a harness process: headless, bounded in wall time, killed with everything it started.

The process gets its own session (process group), so that ending it also ends whatever it
spawned (a CLI's node wrapper, its native binary, MCP helpers). Its stdout — the harness's
event stream, JSONL where it has one — is kept line by line, bounded; its stderr is kept as a
tail, for the record of an episode the harness itself broke.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from typing import Any

MAX_LINES = 2000
MAX_LINE = 8000
STDERR_TAIL = 4000


@dataclass
class ProcessOutcome:
    """How a harness process ended."""

    exit_code: int | None = None
    killed: str | None = None
    """Why we ended it (``None``: it exited by itself)."""
    events: list[Any] = field(default_factory=list)
    """Its stdout, one entry per line: parsed JSON where a line is JSON, else the text."""
    dropped_lines: int = 0
    stderr_tail: str = ""


def ended_how(exit_code: int | None) -> str:
    """``exit_code`` in words: a negative code is the signal that ended the process."""
    if exit_code is not None and exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = "an unknown signal"
        return f"died of {name} (signal {-exit_code})"
    return f"exited with {exit_code}"


async def _read_lines(stream: asyncio.StreamReader, out: ProcessOutcome) -> None:
    while line := await stream.readline():
        if len(out.events) >= MAX_LINES:
            out.dropped_lines += 1
            continue
        text = line.decode("utf-8", "replace").rstrip("\n")[:MAX_LINE]
        try:
            out.events.append(json.loads(text))
        except ValueError:
            out.events.append(text)


async def _read_tail(stream: asyncio.StreamReader, out: ProcessOutcome) -> None:
    while chunk := await stream.read(65536):
        out.stderr_tail = (out.stderr_tail + chunk.decode("utf-8", "replace"))[-STDERR_TAIL:]


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run(argv: list[str], env: dict[str, str], cwd: str, wall_s: float,
              kill: asyncio.Event) -> ProcessOutcome:
    """Run ``argv`` with stdin closed until it exits, ``wall_s`` passes, or ``kill`` is set."""
    out = ProcessOutcome()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    readers = [asyncio.create_task(_read_lines(proc.stdout, out)),
               asyncio.create_task(_read_tail(proc.stderr, out))]
    exited, killed = asyncio.create_task(proc.wait()), asyncio.create_task(kill.wait())
    try:
        done, _ = await asyncio.wait({exited, killed}, timeout=wall_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            out.killed = "asked to stop" if killed in done else f"ran past {wall_s:g} s"
        if out.killed:
            _kill_group(proc)  # the group, before it is reaped: whatever it started goes too
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        killed.cancel()
        out.exit_code = await exited
        await asyncio.wait(readers, timeout=5)
        for task in readers:
            task.cancel()
    return out
