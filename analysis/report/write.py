"""Writing a site to disk without ever leaving half a report or deleting what is not ours.

The site is built in a sibling folder and swapped in at the end, so an interrupted ``limbo
report`` leaves the previous report as it was. An existing ``--out`` is replaced only when it
holds a report (its marker file) or nothing at all.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from limbo import __version__
from limbo.analysis.report.details import bucket_file
from limbo.analysis.report.site import Site
from limbo.base.errors import UsageError

MARKER = "limbo-report.json"


def check_out(out: Path) -> None:
    """A :class:`UsageError` unless ``out`` is new, empty, or an earlier report."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; name a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UsageError(f"--out {out} is not empty and holds no LIMBO report; name a new or "
                         f"empty directory")


def _put(root: Path, name: str, data: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_site(site: Site, out: Path) -> int:
    """Write ``site`` to ``out``; the total size in bytes."""
    check_out(out)
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        for name, data in site.files.items():
            _put(staging, name, data)
        for number in range(site.buckets):  # those the site does not hold, made here
            if bucket_file(number) not in site.files:
                _put(staging, bucket_file(number), site.bucket(number) or b"")
        _put(staging, MARKER, json.dumps({"generator": "limbo report", "version": __version__,
                                          "episodes": site.episodes}).encode() + b"\n")
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
