"""Reading a world: one TOML file, or a directory whose ``*.toml`` files together make one
world (say, ``services.toml`` and ``templates.toml``), with every problem placed at a file and
line.

A directory's files are merged: exactly one holds ``[world]``, each service is declared in one
file, and the templates of all files are taken in file-name order. The world's digest covers
every file's name and bytes, so changing any of them makes another world.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.sim.worldfile.lines import Lines

MAX_BYTES = 2_000_000
"""Largest world file read (a world of hundreds of tools is far smaller)."""
MAX_FILES = 200
MAX_DEPTH = 32
"""Deepest nesting of tables and arrays (a world needs about eight): deeper files are refused
in one line before anything walks them, so no reader recurses past Python's limit."""
BOM = "\ufeff"
_TOML_AT = re.compile(r"\(at line (\d+), column \d+\)")


@dataclass(frozen=True)
class WorldProblem:
    """One thing wrong with a world file, where it is: the file, the line and the key path
    (empty for a problem of the whole file)."""

    file: str
    line: int
    message: str
    path: tuple[str | int, ...] = ()

    def __str__(self) -> str:
        where = f"{dotted(self.path)}: " if self.path else ""
        return f"{self.file}:{self.line}: {where}{self.message}"


def dotted(path: Sequence[str | int]) -> str:
    """A key path as a reader finds it in the file: ``templates[1].steps[0].intent``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


class WorldFileError(UsageError):
    """A world that cannot be used; ``problems`` lists every one found."""

    def __init__(self, problems: list[WorldProblem]) -> None:
        more = len(problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''}: limbo world check " \
               f"{problems[0].file} lists them)" if more else ""
        super().__init__(f"{problems[0]}{tail}")
        self.problems = problems


@dataclass
class Part:
    """One file of a world."""

    path: Path
    raw: dict[str, Any]
    lines: Lines


@dataclass
class Source:
    """A world's files, merged into one raw table, each path traceable to its file and line."""

    root: Path
    parts: list[Part] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    problems: list[WorldProblem] = field(default_factory=list)
    _service_part: dict[str, int] = field(default_factory=dict)
    _template_part: list[tuple[int, int]] = field(default_factory=list)
    _world_part: int = 0

    def where(self, path: Sequence[str | int]) -> tuple[str, int]:
        """The file and line of ``path`` (a location in :attr:`raw`)."""
        if not self.parts:
            return str(self.root), 1
        index, local = self._world_part, tuple(path)
        if len(path) > 1 and path[0] == "services" and path[1] in self._service_part:
            index = self._service_part[str(path[1])]
        elif len(path) > 1 and path[0] == "templates" and isinstance(path[1], int) \
                and path[1] < len(self._template_part):
            index, at = self._template_part[path[1]]
            local = ("templates", at, *path[2:])
        part = self.parts[index]
        return str(part.path), part.lines.line(local)

    def problem(self, path: Sequence[str | int], message: str) -> None:
        file, line = self.where(path)
        self.problems.append(WorldProblem(file, line, message, tuple(path)))


def read(path: Path) -> Source:
    """The world at ``path`` (a file or a directory), merged; reading problems are in
    :attr:`Source.problems` (a source with problems has no usable :attr:`Source.raw`)."""
    source = Source(path)
    files = _files(path, source)
    sha = hashlib.sha256()
    left = MAX_BYTES
    for file in files:
        data = _bytes(file, source, left)
        if data is None:
            continue
        left -= len(data)
        sha.update(f"{file.name}\0{len(data)}\0".encode())
        sha.update(data)
        part = _parse(file, data, source)
        if part is not None:
            source.parts.append(part)
    source.digest = sha.hexdigest()
    if not source.problems:
        _merge(source)
    if not source.problems and not source.raw:
        source.problems.append(WorldProblem(str(path), 1, "the world declares nothing: it needs a "
                                                     "[world] table and at least one "
                                                     "[services.<name>]"))
    return source


def _files(path: Path, source: Source) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.glob("*.toml") if p.is_file())
        if not files:
            source.problems.append(WorldProblem(str(path), 1, "the directory holds no *.toml file"))
        if len(files) > MAX_FILES:
            source.problems.append(WorldProblem(str(path), 1, f"the directory holds {len(files)} "
                                                         f"*.toml files; at most {MAX_FILES}"))
            return []
        return files
    if not path.exists():
        source.problems.append(WorldProblem(str(path), 1, "no such file or directory"))
        return []
    if not path.is_file():
        source.problems.append(WorldProblem(str(path), 1, "not a regular file or a directory"))
        return []
    return [path]


def _bytes(file: Path, source: Source, left: int) -> bytes | None:
    """The file's bytes, when they fit in the ``left`` bytes a world may still have."""
    try:
        size = file.stat().st_size
        if size > left:
            whole = "a world" if left < MAX_BYTES else "a world file"
            source.problems.append(WorldProblem(str(file), 1, f"the file is {size:,} bytes; "
                                                         f"{whole} may have at most {MAX_BYTES:,}"))
            return None
        data = file.read_bytes()
        return data if len(data) <= left else None
    except OSError as exc:
        source.problems.append(WorldProblem(str(file), 1, f"cannot read: {exc.strerror}"))
        return None


def _parse(file: Path, data: bytes, source: Source) -> Part | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        source.problems.append(WorldProblem(str(file), line, f"not UTF-8 text (byte {exc.start}); "
                                                        f"TOML files are UTF-8"))
        return None
    text = text.removeprefix(BOM)  # as some editors start a UTF-8 file; TOML has no use for it
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_AT.search(str(exc))
        message = _TOML_AT.sub("", str(exc)).strip()
        source.problems.append(WorldProblem(str(file), int(found.group(1)) if found else 1,
                                       f"not valid TOML: {message}"))
        return None
    except RecursionError:  # nesting in the hundreds: the parser itself recurses per level
        source.problems.append(_too_deep(file, text, None))
        return None
    deep = too_deep(raw, MAX_DEPTH)
    if deep is not None:
        source.problems.append(_too_deep(file, text, deep))
        return None
    part = Part(file, raw, Lines(text))
    for at, what in _unsupported(raw, ()):
        source.problems.append(WorldProblem(str(file), part.lines.line(at), what, at))
    return part


def too_deep(value: Any, limit: int) -> tuple[str | int, ...] | None:
    """The path of the first value nested deeper than ``limit`` (walked without recursion, so
    any depth is safe), or ``None``."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        at, node = stack.pop()
        if len(at) > limit:
            return at
        if isinstance(node, dict):
            stack.extend(((*at, k), v) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*at, i), v) for i, v in reversed(list(enumerate(node))))
    return None


def _too_deep(file: Path, text: str, deep: tuple[str | int, ...] | None) -> WorldProblem:
    """The problem of a file nested too deep, at the line (and key path) where it goes past
    the limit: ``deep`` is that path when the file parsed."""
    lines = Lines(text)
    line = bracket_line(text, MAX_DEPTH)
    if deep is not None:
        placed = next((n for p, n in lines.at.items() if p[:len(deep)] == deep), None)
        line = min(line, placed or lines.line(deep))
    else:
        deep = next((p for p, n in lines.at.items() if n == line), ())
    shown = ".".join(map(str, deep[:6])) + (".…" if len(deep) > 6 else "")
    return WorldProblem(str(file), line, f"{shown or '(the file)'}: nested deeper than "
                                         f"{MAX_DEPTH} levels of tables and arrays; a world "
                                         f"file needs far fewer: write the values flat")


_TOKEN = re.compile(r'"""|\'\'\'|\\.|["\'#\n\[\]{}]')


def bracket_line(text: str, limit: int) -> int:
    """The line on which brackets and braces (outside strings and comments) first nest deeper
    than ``limit`` (the last line when they never do: the depth is then in dotted keys)."""
    depth, line, quote = 0, 1, ""
    for token in _TOKEN.finditer(text):
        tok = token.group()
        if tok == "\n":
            line += 1
            quote = "" if quote in ("#", '"', "'") else quote
        elif quote:
            if tok[0] == "\\" and quote in ("'", "'''"):  # a literal string has no escapes
                tok = tok[1:]
            quote = "" if tok == quote else quote
        elif tok in ('"""', "'''", '"', "'", "#"):
            quote = tok
        elif tok in "[{":
            depth += 1
            if depth > limit:
                return line
        elif tok in "]}":
            depth -= 1
    return line


def _unsupported(value: Any, at: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """Values TOML allows and a world cannot hold: dates and times (no JSON value carries
    them, so no tool argument or record can) and NaN or infinity (not JSON either)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _unsupported(v, (*at, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unsupported(v, (*at, i))]
    if isinstance(value, (datetime.date, datetime.time)):
        return [(at, "dates and times are not values a world can hold; write a string")]
    if isinstance(value, float) and not math.isfinite(value):
        return [(at, f"{value} is not a finite number")]
    return []


def _merge(source: Source) -> None:
    """Join the parts into one raw table, refusing what two files both declare."""
    merged: dict[str, Any] = {}
    services: dict[str, Any] = {}
    templates: list[Any] = []
    for index, part in enumerate(source.parts):
        raw = part.raw
        for key, value in raw.items():
            if key == "services" and isinstance(value, dict):
                _services(source, index, value, services)
            elif key == "templates" and isinstance(value, list):
                source._template_part += [(index, i) for i in range(len(value))]
                templates += value
            elif key in merged:
                file, line = str(part.path), part.lines.line((key,))
                source.problems.append(WorldProblem(file, line, f"[{key}] is declared in two files"))
            else:
                merged[key] = value
                if key == "world":
                    source._world_part = index
    if services or "services" in merged:
        merged.setdefault("services", services)
    if templates:
        merged.setdefault("templates", templates)
    source.raw = merged


def _services(source: Source, index: int, value: dict[str, Any], into: dict[str, Any]) -> None:
    part = source.parts[index]
    for name, body in value.items():
        if name in into:
            line = part.lines.line(("services", name))
            source.problems.append(WorldProblem(str(part.path), line,
                                           f"service {name!r} is declared in two files"))
            continue
        into[name] = body
        source._service_part[name] = index
