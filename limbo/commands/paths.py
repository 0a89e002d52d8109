"""Paths the user names for output (``--out``, ``--cache-dir``, ``--junit``), checked before
anything is written.

Each must be creatable or writable, a directory and not a file (nor inside one) — or, for a
file output, a file in such a directory —, valid UTF-8 (its name is written into manifests),
and within the file system's limits on names and paths, so that a bad path is one line naming
the flag, never a traceback from deep inside a run.

And no output may land on a run's records: after ``..`` and symbolic links are resolved, an
output path must not be (or lie inside) a file a run directory keeps (``episodes*.jsonl``,
``manifest*.json``, ``quarantine.jsonl``, ``superseded.jsonl``, its locks), and an output
directory of tables, figures or a report must not be a run directory itself — a report would
replace it, tables and figures would mix into it. (``x/../../RUN/episodes.jsonl`` passes a
check made on the path as typed when ``x`` does not exist yet, and renames the records away
once ``x`` is created.)
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from limbo.base.errors import UsageError

NAME_MAX, PATH_MAX = 255, 4096
RESERVED_PATH = 64
"""Room left in a path for the run directory's own file names."""


def check_dir(path: Path, flag: str) -> None:
    """``path`` can be used as the directory ``flag`` names; a :class:`UsageError` otherwise."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag} {str(path)!r} is not valid UTF-8; name a directory whose name "
                         f"is UTF-8 text") from None
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UsageError(f"{flag}: the name {part[:24]!r}... is {len(os.fsencode(part))} "
                             f"bytes long; a file name may have at most {NAME_MAX}")
    if len(os.fsencode(path.absolute())) + RESERVED_PATH > PATH_MAX:
        raise UsageError(f"{flag} {str(path)[:40]!r}... is too long a path (at most "
                         f"{PATH_MAX - RESERVED_PATH} bytes)")
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; name a directory")
    base = path.absolute()
    while not base.exists():
        if base.is_symlink():
            raise UsageError(f"{flag} {path}: {base} is a dangling symbolic link")
        base = base.parent
    if not base.is_dir():
        raise UsageError(f"{flag} {path}: {base} is a file, so nothing can be created inside it")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {base} is not writable")


RUN_FILES = ("episodes*.jsonl", "manifest*.json", "quarantine.jsonl", "superseded.jsonl",
             ".writer*.lock", ".writers.lock", ".reserve.*", ".episodes*.tmp", ".manifest*.tmp")
"""What a run directory keeps (:mod:`limbo.log.store`, :mod:`limbo.log.runlock`)."""


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a directory holding a run's records or manifest."""
    return path.is_dir() and (any(path.glob("manifest*.json")) or
                              any(path.glob("episodes*.jsonl")))


def _run_file_owner(resolved: Path) -> Path | None:
    """The run directory one of whose files ``resolved`` is or lies inside."""
    for part in (resolved, *resolved.parents):
        if any(fnmatch.fnmatchcase(part.name, pattern) for pattern in RUN_FILES) and \
                is_run_dir(part.parent):
            return part.parent
    return None


def check_output(path: Path, flag: str, *, run: bool = False, file: bool = False) -> Path:
    """``path`` can take what ``flag`` writes without touching a run's records: the resolved
    path, to write to. ``run``: it may be a run directory (``limbo run``'s and ``limbo
    mcp``'s own ``--out``); ``file``: it names a file, not a directory."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symbolic-link loop, an unreadable parent
        raise UsageError(f"{flag} {path}: cannot resolve the path ({exc})") from None
    owner = _run_file_owner(resolved)
    if owner is not None:
        raise UsageError(f"{flag} {path} resolves to {resolved}, which is the run directory "
                         f"{owner}'s own; name a path outside its records")
    check_dir(path.parent if file else path, flag)
    if file:
        if resolved.is_dir():
            raise UsageError(f"{flag} {path} is a directory; name a file")
        check_dir(resolved.parent, flag)
    elif not run and is_run_dir(resolved):
        raise UsageError(f"{flag} {path} resolves to {resolved}, a run directory; write "
                         f"{flag} elsewhere (a run directory holds only its run)")
    else:
        check_dir(resolved, flag)
    return resolved
