"""Whether two run directories hold the same records, byte for byte, apart from ``runtime``.

    python tools/same_records.py RUN_A RUN_B

A performance change must not change what a grid records: this compares the record lines of
both directories sorted, each with its ``runtime`` (wall time, host facts, the one field that
is not a function of the cell) cut off the text itself, so the comparison is of the bytes as
written, not of re-encoded values. The lines are read by LIMBO's one reader
(:func:`limbo.log.reader.lines`, plain or gzip). ``runtime`` is the last key of every record
(see :func:`limbo.episode.run_one._record`); a line where it is not is reported, never silently
compared. Exit status 0 when the records are the same, 1 otherwise.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from limbo.log.reader import lines
from limbo.log.store import record_files

RUNTIME = b', "runtime": {'


def stripped(run_dir: Path) -> list[bytes]:
    """Every record line of ``run_dir`` without its ``runtime``, sorted."""
    out = []
    for path in record_files(run_dir):
        for line in lines(path):
            raw = line.raw.rstrip(b"\r\n")
            cut = raw.rfind(RUNTIME)
            if cut < 0 or raw.count(b'"runtime"') != 1 or not raw.endswith(b"}}"):
                raise SystemExit(f"{path} line {line.number}: runtime is not the record's last key")
            out.append(raw[:cut] + b"}")
    return sorted(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = (stripped(Path(arg)) for arg in argv)
    for name, found in zip(argv, (a, b), strict=True):
        print(f"{name}: {len(found)} records, sha256 {hashlib.sha256(b''.join(found)).hexdigest()}")
    if a == b:
        print("same records (sorted, without runtime)")
        return 0
    pairs = enumerate(zip(a, b, strict=False))
    first = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
    print(f"different: first difference at sorted line {first + 1}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
