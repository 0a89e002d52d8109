"""One writer per shard of a run directory.

A writer claims either the whole directory or one shard ``I/N``. Two claims conflict when they
can hold the same cell: the whole directory conflicts with everything, and shards ``I/N`` and
``J/M`` share cells exactly when ``I ≡ J (mod gcd(N, M))`` (cells go to shards by their id
modulo ``N``). So ``1/3`` and ``2/3`` run side by side, while ``1/2`` and ``1/3`` do not.

Each claim is an ``flock`` on its own file (``.writer.all.lock``, ``.writer.shard-1-of-3.lock``)
holding a note on who holds it. The kernel drops an ``flock`` when its process dies, so a run
killed with ``kill -9`` leaves no stale lock: its file stays behind, unlocked, and the next
writer takes it over. Checking the other claims and taking one's own happen under a short
directory-wide lock (``.writers.lock``), so two writers starting at the same moment cannot both
pass the check. None of these files matches ``episodes*.jsonl``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.runtime import host_facts, now_iso, pause

MUTEX = ".writers.lock"
MUTEX_WAIT_S = 30.0
_CLAIM_FILE = re.compile(r"^\.writer\.(all|shard-(\d+)-of-(\d+))\.lock$")


@dataclass(frozen=True)
class WriterClaim:
    """The whole directory (``shard is None``) or one shard ``(I, N)``."""

    shard: tuple[int, int] | None

    def overlaps(self, other: WriterClaim) -> bool:
        if self.shard is None or other.shard is None:
            return True
        (i, n), (j, m) = self.shard, other.shard
        return (i - j) % math.gcd(n, m) == 0

    @property
    def label(self) -> str:
        return "the whole directory" if self.shard is None else f"shard {self.shard[0]}/{self.shard[1]}"

    @property
    def tag(self) -> str:
        """``all`` or ``shard-I-of-N``: the suffix of this claim's files."""
        return "all" if self.shard is None else f"shard-{self.shard[0]}-of-{self.shard[1]}"

    @property
    def filename(self) -> str:
        return f".writer.{self.tag}.lock"


def claim_of(filename: str) -> WriterClaim | None:
    """The claim a lock file stands for; ``None`` for any other file."""
    found = _CLAIM_FILE.match(filename)
    if found is None:
        return None
    if found.group(1) == "all":
        return WriterClaim(None)
    return WriterClaim((int(found.group(2)), int(found.group(3))))


@contextlib.contextmanager
def directory_mutex(run_dir: Path) -> Iterator[None]:
    """The short directory-wide lock around checking and taking claims."""
    fd = _open(run_dir / MUTEX, os.O_RDWR | os.O_CREAT)
    try:
        waited = 0.0
        while not _try_flock(fd, fcntl.LOCK_EX):
            if waited >= MUTEX_WAIT_S:
                raise UsageError(f"{run_dir}: another limbo process has held {MUTEX} for "
                                 f"{MUTEX_WAIT_S:.0f}s; is it stopped (kill -STOP)?")
            pause(0.05)
            waited += 0.05
        yield
    finally:
        os.close(fd)


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot open {path}: {exc.strerror}") from None


def _try_flock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the claim file ``path`` — its note — or ``None`` when nobody does.
    (Call under :func:`directory_mutex`, so a probe never races a writer taking its claim.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _try_flock(fd, fcntl.LOCK_SH):
            return None
        try:
            note = json.loads(os.pread(fd, 65536, 0) or b"{}")
        except ValueError:
            note = {}
        return note if isinstance(note, dict) else {}
    finally:
        os.close(fd)


def describe_holder(note: dict[str, Any]) -> str:
    """``pid 123 on host h (shard 1/2, since ...)``."""
    return (f"pid {note.get('pid', '?')} on {note.get('host', '?')} "
            f"({note.get('claim', '?')}, since {note.get('since', '?')})")


def active_claims(run_dir: Path) -> list[tuple[WriterClaim, dict[str, Any]]]:
    """The claims held right now, with their holders' notes."""
    if not (run_dir / MUTEX).exists():
        return []
    with directory_mutex(run_dir):
        return [(claim, note) for claim, path in _claim_files(run_dir)
                if (note := holder(path)) is not None]


def _claim_files(run_dir: Path) -> list[tuple[WriterClaim, Path]]:
    found = []
    for path in sorted(run_dir.glob(".writer.*.lock")):
        claim = claim_of(path.name)
        if claim is not None:
            found.append((claim, path))
    return found


class WriterLock:
    """This process's claim on ``run_dir``, held until :meth:`release` (or the process's
    death). Acquiring refuses at once, naming the holder, if an overlapping claim is held."""

    def __init__(self, run_dir: Path, shard: tuple[int, int] | None) -> None:
        self.run_dir = run_dir
        self.claim = WriterClaim(shard)
        self.path = run_dir / self.claim.filename
        self.fd: int | None = None

    def acquire(self) -> None:
        with directory_mutex(self.run_dir):
            for claim, path in _claim_files(self.run_dir):
                if not claim.overlaps(self.claim):
                    continue
                note = holder(path)
                if note is not None:
                    raise UsageError(self._refusal(claim, note))
                if claim != self.claim:
                    path.unlink(missing_ok=True)  # stale: its writer died
            fd = _open(self.path, os.O_RDWR | os.O_CREAT)
            if not _try_flock(fd, fcntl.LOCK_EX):  # only a writer skipping the mutex gets here
                os.close(fd)
                raise UsageError(f"{self.run_dir}: {self.claim.label} is locked by another process")
            note = {"pid": os.getpid(), "host": host_facts()["host"], "claim": self.claim.label,
                    "since": now_iso()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(note).encode(), 0)
            self.fd = fd

    def _refusal(self, claim: WriterClaim, note: dict[str, Any]) -> str:
        what = ("another writer" if claim == self.claim
                else f"a writer of {claim.label}, which overlaps {self.claim.label},")
        return (f"{self.run_dir} is in use: {what} is running — {describe_holder(note)}; "
                f"wait for it to finish or stop it, or choose another --out")

    def release(self) -> None:
        if self.fd is None:
            return
        with directory_mutex(self.run_dir):
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None
