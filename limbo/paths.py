"""Directories the user names (``--out``, ``--cache-dir``), checked before anything is written.

Each must be creatable or writable, a directory and not a file (nor inside one), valid UTF-8
(its name is written into manifests), and within the file system's limits on names and paths —
so that a bad path is one line naming the flag, never a traceback from deep inside a run.
"""

from __future__ import annotations

import os
from pathlib import Path

from limbo.errors import UsageError

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
