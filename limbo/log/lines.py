"""Records files as lines: opening one plain or gzip-compressed (told by its first bytes, not its
name), splitting it into numbered lines with their byte offsets, and reading lines back by those
offsets. Nothing here decodes a line: judging it is :mod:`limbo.log.reader`'s, which hands these
on as its own.
"""

from __future__ import annotations

import gzip
import io
import os
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

_GZIP = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a records file: its number (from 1), byte offset and bytes, newline kept."""

    number: int
    offset: int
    raw: bytes

    @property
    def torn(self) -> bool:
        """Whether the line lacks its newline: the last line of a write cut by a kill (or being
        written right now)."""
        return not self.raw.endswith(b"\n")


# -- files ------------------------------------------------------------------------------------


def open_bytes(path: Path) -> IO[bytes]:
    """A records file's bytes, decompressed when the file is gzip."""
    fh = cast(io.BufferedReader, path.open("rb", buffering=1 << 20))
    if fh.peek(2)[:2] == _GZIP:
        return cast(IO[bytes], gzip.GzipFile(fileobj=fh, mode="rb"))
    return fh


def lines(source: Path | IO[bytes]) -> Iterator[Line]:
    """Every line of a records file (or of an open stream of records), in order. Of a gzip file
    cut short, every whole line before the cut is read, and what follows it is a torn line."""
    if isinstance(source, Path):
        with cast(io.BufferedReader, source.open("rb", buffering=1 << 20)) as fh:
            if fh.peek(2)[:2] == _GZIP:
                yield from split(_inflated(fh))
                return
            yield from _numbered(fh)
        return
    with source:
        yield from _numbered(source)


def _numbered(fh: Iterable[bytes]) -> Iterator[Line]:
    offset = 0
    for number, raw in enumerate(fh, start=1):
        yield Line(number, offset, raw)
        offset += len(raw)


def _inflated(fh: IO[bytes]) -> Iterator[bytes]:
    """The decompressed bytes of every gzip member, in chunks; a cut stream ends early."""
    inflater = zlib.decompressobj(wbits=31)
    while chunk := fh.read(1 << 20):
        while chunk:
            try:
                yield inflater.decompress(chunk)
            except zlib.error:
                return  # corrupt data: what came before it is all there is
            chunk = inflater.unused_data
            if inflater.eof:
                inflater = zlib.decompressobj(wbits=31)


def split(chunks: Iterable[bytes]) -> Iterator[Line]:
    """Numbered lines of a stream given in chunks cut anywhere (offsets from its start); what
    follows the last newline is a torn line."""
    number, offset, rest = 0, 0, b""
    for chunk in chunks:
        whole = rest + chunk
        cut = whole.rfind(b"\n") + 1
        for raw in io.BytesIO(whole[:cut]):  # C-level splitting, each line's newline kept
            number += 1
            yield Line(number, offset, raw)
            offset += len(raw)
        rest = whole[cut:]
    if rest:
        yield Line(number + 1, offset, rest)



class Offsets:
    """Lines read back by (offset, length), in any order and from any process: a plain file by
    ``os.pread`` (no buffer refilled per read, no shared file position, so forked workers share
    the descriptor safely); any other stream — gzip, an Inspect log's records — is written out
    once to an unnamed temporary file and read back the same way."""

    def __init__(self, source: Path | IO[bytes]) -> None:
        self._fh: IO[bytes]
        if isinstance(source, Path) and not is_gzip(source):
            self._fh = source.open("rb", buffering=0)
            return
        self._fh = tempfile.TemporaryFile()
        for line in lines(source):  # a gzip file cut short ends in its torn line, as read
            self._fh.write(line.raw)
        self._fh.flush()

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._fh.fileno(), length, offset)

    def close(self) -> None:
        self._fh.close()


def is_gzip(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(2) == _GZIP
