"""Where in a TOML file each key was written, so a problem can name its line.

``tomllib`` keeps no positions, so this reads the text once more, line by line, and records the
line of every table header (``[a.b]``, ``[[a]]`` with its index), every key (dotted keys too)
and every element of an array that spans lines. It is not a TOML parser: the file has already
parsed, so it only has to follow the structure well enough to place a path; a path it cannot
place falls back to its nearest placed ancestor.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Path = tuple[str | int, ...]
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key_parts(text: str) -> list[str] | None:
    """The parts of a (dotted) key, or ``None`` if ``text`` is not one."""
    parts: list[str] = []
    rest = text.strip()
    while rest:
        if rest[0] in "\"'":
            end = rest.find(rest[0], 1)
            if end < 0:
                return None
            parts.append(rest[1:end])
            rest = rest[end + 1:].strip()
        else:
            found = _BARE.match(rest)
            if not found:
                return None
            parts.append(found.group(0))
            rest = rest[found.end():].strip()
        if rest.startswith("."):
            rest = rest[1:].strip()
        elif rest:
            return None
    return parts or None


class Lines:
    """The line of each path of one TOML text (1-based)."""

    def __init__(self, text: str) -> None:
        self.at: dict[Path, int] = {}
        self._arrays: dict[Path, int] = {}
        self._table: Path = ()
        self._scan(text.splitlines())

    def line(self, path: Sequence[str | int]) -> int:
        """The line of ``path``, or of its nearest ancestor that was placed (1 if none)."""
        key = tuple(path)
        while key:
            if key in self.at:
                return self.at[key]
            key = key[:-1]
        return 1

    def _scan(self, lines: list[str]) -> None:
        stack: list[tuple[Path, int]] = []  # open arrays: (path, next element index)
        depth = 0
        quote: str | None = None  # an open multi-line string
        for number, raw in enumerate(lines, start=1):
            if quote is not None:
                if quote in raw:
                    quote = None
                continue
            if depth == 0:
                depth, quote = self._line(raw, number, stack)
            else:
                depth = self._inside(raw, number, stack, depth)

    def _line(self, raw: str, number: int,
              stack: list[tuple[Path, int]]) -> tuple[int, str | None]:
        text = raw.strip()
        if not text or text.startswith("#"):
            return 0, None
        if text.startswith("[["):
            self._array_table(text[2:text.find("]]")], number)
            return 0, None
        if text.startswith("["):
            self._header(text[1:text.find("]")], number)
            return 0, None
        if "=" not in text:
            return 0, None
        key, value = text.split("=", 1)
        parts = _key_parts(key)
        if parts is None:
            return 0, None
        path = (*self._table, *parts)
        self.at.setdefault(path, number)
        value = value.strip()
        for quote in ('"""', "'''"):
            if value.startswith(quote) and value.count(quote) == 1:
                return 0, quote
        depth = _depth(value)
        if depth > 0:
            stack.append((path, 0))
            if value[1:].strip().startswith("{"):
                self.at.setdefault((*path, 0), number)
                stack[-1] = (path, 1)
        return depth, None

    def _inside(self, raw: str, number: int, stack: list[tuple[Path, int]], depth: int) -> int:
        """A line inside an open array: each element that starts at depth 1 gets this line."""
        text = raw.strip()
        if stack and depth == 1 and text[:1] in "{[\"'0123456789-tf":
            path, index = stack[-1]
            self.at.setdefault((*path, index), number)
            stack[-1] = (path, index + 1)
        depth += _depth(text)
        if depth <= 0 and stack:
            stack.pop()
        return max(depth, 0)

    def _resolve(self, parts: list[str]) -> Path:
        """A header's path, with the current index of every array of tables it passes."""
        path: Path = ()
        for part in parts:
            path = (*path, part)
            if path in self._arrays:
                path = (*path, self._arrays[path])
        return path

    def _header(self, inner: str, number: int) -> None:
        parts = _key_parts(inner)
        if parts is None:
            return
        self._table = self._resolve(parts)
        self.at.setdefault(self._table, number)

    def _array_table(self, inner: str, number: int) -> None:
        parts = _key_parts(inner)
        if parts is None:
            return
        base = self._resolve(parts[:-1]) + (parts[-1],)
        index = self._arrays.get(base, -1) + 1
        self._arrays[base] = index
        self.at.setdefault(base, number)
        self._table = (*base, index)
        self.at[self._table] = number


def _depth(text: str) -> int:
    """Net count of brackets and braces opened in ``text``, outside strings and comments."""
    depth, quote = 0, None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is not None:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        i += 1
    return depth
