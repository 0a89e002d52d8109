"""The one reader of episode records: every module that reads ``episodes*.jsonl`` (the store, the
analysis, ``limbo show``/``status``/``list``/``episode --from``, replays, Inspect logs) takes
its lines and records from here, so all of them meet bad input the same way.

It owns, once: **the versions this LIMBO reads**, :data:`READABLE` (the shape itself is
:mod:`limbo.log.records`); the records files' **lines** (:func:`lines`, :class:`Offsets`, from
:mod:`limbo.log.lines`: plain or gzip, numbered, with their byte offsets); **judging one line**
(:func:`decode` for the whole record, :func:`parts` for the cell and outcome only — the
analysis's fast path; :mod:`limbo.log.quick` gives the same verdict with only the few fields
``limbo status``, a resume and the report count): a line is a record, or a :class:`Skip`
saying why not, of one of three kinds — ``unparseable`` (empty, torn by a kill, not UTF-8,
not strict JSON, not a record object), ``invalid record`` (a termination or event type outside
the closed sets), ``unknown schema`` (a version not in :data:`READABLE`). A reader never crashes on a line and never takes a bad one;
what it does with a skipped line is its own policy — the analysis reports it as a problem, the
store quarantines it, and a writer refuses a directory holding a version it does not read
(running such a cell again would misread a newer run). A record handed on by :func:`decode`
passed the cheap checks (version, id, the kinds of cell, outcome and events, the closed sets);
**the full check**, :func:`validate`, checks the whole shape against its pydantic edge.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, get_args

import msgspec

from limbo.base.errors import UsageError

# The lines of a records file, handed on: every reader takes them from here.
from limbo.log.lines import Line as Line
from limbo.log.lines import Offsets as Offsets
from limbo.log.lines import lines as lines
from limbo.log.lines import open_bytes as open_bytes
from limbo.log.versions import EPISODE_ID, SCHEMA, SCHEMA_PREFIX, Version
from limbo.sim.kinds import EVENT_TYPES, TERMINATIONS

if TYPE_CHECKING:  # the record's pydantic edge is imported only to validate (``validate``)
    from limbo.log.records import EpisodeRecord

READABLE: tuple[str, ...] = get_args(Version)
"""The record versions this LIMBO reads: the one list every reader refers to."""

UNPARSEABLE, INVALID, UNKNOWN = "unparseable", "invalid record", "unknown schema"
VALID_ID = re.compile(EPISODE_ID)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""Strict JSON: NaN and Infinity are refused (no other reader of JSON would take them back)."""


class RecordError(UsageError):
    """A stored record that this LIMBO cannot read: one line saying why."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a line is not a record: its kind (``unparseable``, ``invalid record``,
    ``unknown schema``) and a short reason."""

    kind: str
    reason: str


# -- one line ---------------------------------------------------------------------------------


class _NotRecord(ValueError):
    """JSON that is not a record."""


def _text(raw: bytes) -> str | Skip:
    if not raw.endswith(b"\n"):
        return Skip(UNPARSEABLE, "torn last line (an interrupted write)")
    if not raw.strip():
        return Skip(UNPARSEABLE, "an empty line")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Skip(UNPARSEABLE, f"not UTF-8 (byte {exc.start})")


def decode(raw: bytes) -> EpisodeRecord | Skip:
    """A complete line as a record (the cheap checks made), or why it is not one."""
    text = _text(raw)
    if isinstance(text, Skip):
        return text
    try:
        record = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        return _unparseable(exc)
    return _judged(record)


def _unparseable(exc: Exception) -> Skip:
    if isinstance(exc, json.JSONDecodeError):
        return Skip(UNPARSEABLE, f"not JSON ({exc.msg} at column {exc.colno})")
    if isinstance(exc, _NotRecord):
        return Skip(UNPARSEABLE, str(exc))
    return Skip(UNPARSEABLE, f"not strict JSON ({str(exc)[:80]})")


def _judged(record: Any) -> EpisodeRecord | Skip:
    if not isinstance(record, dict):
        return Skip(UNPARSEABLE, f"a JSON {type(record).__name__}, not a record")
    schema = record.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        return Skip(UNPARSEABLE, f"no {SCHEMA_PREFIX}N schema")
    episode = record.get("episode_id")
    if not isinstance(episode, str) or not VALID_ID.match(episode):
        return Skip(UNPARSEABLE, "no valid episode_id")
    for name, kind in (("cell", dict), ("outcome", dict), ("events", list)):
        if not isinstance(record.get(name), kind):
            return Skip(UNPARSEABLE, f"no {name} {kind.__name__}")
    version = version_problem(schema)
    if version is not None:
        return Skip(UNKNOWN, f"episode {episode}: {version}")
    problem = closed_set_problem(record)
    return Skip(INVALID, problem) if problem is not None else cast("EpisodeRecord", record)


SHALLOW = 400
"""Brackets a line may hold for msgspec's verdict to stand for Python's decoder's, which gives
up nearer the recursion limit the deeper its caller (both at about 1,000 levels)."""


Parts = tuple[str, str, dict[str, Any], dict[str, Any]]
"""(schema, episode id, cell, outcome)."""


def parts(raw: bytes) -> Parts | Skip:
    """A complete line's cell and outcome (the analysis's row), or why it is not a record.

    Records keep a fixed key order, so both parts are found by offset and nothing else is
    decoded; a line that does not look like a whole record takes a full parse. Event types are
    checked as events are decoded (:func:`events`): scanning every line for them would cost a
    loader that reads only cell and outcome a third more."""
    text = _text(raw)
    if isinstance(text, Skip):
        return text
    try:
        found = _fast(text) or _full(text)
    except (ValueError, RecursionError) as exc:
        return _unparseable(exc)
    schema, episode_id, _, outcome = found
    version = version_problem(schema)
    if version is not None:
        return Skip(UNKNOWN, f"episode {episode_id:.80}: {version}")
    termination = outcome.get("termination")
    if termination not in TERMINATIONS:
        return Skip(INVALID, _termination(termination))
    return found


def wall_of(raw: bytes) -> float:
    """A record line's ``runtime.wall_s`` (NaN when it has none): the runtime is the record's
    last part, so only it is decoded — the loader reads it beside cell and outcome for the
    price of one small object, where a second pass over the lines cost Table 15 a third of a
    second on the paper grid. A writer that put it elsewhere takes the standard decoder."""
    at = raw.rfind(b'"runtime": ')
    if at < 0:
        return math.nan
    try:
        runtime = _ANY.decode(raw[at + 11:raw.rfind(b"}\n")])
    except msgspec.DecodeError:
        runtime = _runtime_anywhere(raw)
    wall = runtime.get("wall_s") if isinstance(runtime, dict) else None
    return float(wall) if isinstance(wall, int | float) and not isinstance(wall, bool) else math.nan


def _runtime_anywhere(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
        return _DECODER.raw_decode(text, text.rfind('"runtime": ') + 11)[0]
    except (ValueError, RecursionError):
        return None


def _fast(text: str) -> Parts | None:
    if not (text.startswith('{"schema": "') and text.endswith("}\n")):
        return None
    try:
        schema = text[12:text.index('"', 12)]
        start = text.index('"episode_id": "', 12, 200) + 15
        episode_id = text[start:text.index('"', start)]
        start = text.index('"cell": ', start) + 8
        cell, end = _object_at(text, start, ', "header": ')
        start = text.index('"outcome": ', end) + 11
        outcome, _ = _object_at(text, start, ', "report": ')
    except ValueError:
        return None
    if not (isinstance(cell, dict) and isinstance(outcome, dict) and "fault_fired" in outcome):
        return None
    if "\\" in schema or "\\" in episode_id:  # an escape: the string may go on past that quote
        return None
    return schema, episode_id, cell, outcome


_ANY = msgspec.json.Decoder()


def _object_at(text: str, start: int, after: str) -> tuple[Any, int]:
    """``_DECODER.raw_decode(text, start)`` at half the cost: an object that ends where ``after``
    (the key that follows it in a record) begins is decoded by msgspec, which builds the same
    values and refuses what the standard decoder refuses (tests/test_reader_parts.py); the
    standard decoder reads anything else (``after`` inside a string, deep nesting, a refusal)."""
    end = text.find(after, start)
    part = text[start:end] if end > start and text[start] == "{" else ""
    if part and part.count("[") + part.count("{") <= SHALLOW:
        with contextlib.suppress(msgspec.DecodeError):
            return _ANY.decode(part), end
    return _DECODER.raw_decode(text, start)


def _full(text: str) -> Parts:
    record = _DECODER.decode(text)
    if not isinstance(record, dict):
        raise _NotRecord(f"a JSON {type(record).__name__}, not a record")
    cell, outcome, episode_id = record.get("cell"), record.get("outcome"), record.get("episode_id")
    if not (isinstance(cell, dict) and isinstance(outcome, dict) and isinstance(episode_id, str)):
        raise _NotRecord("no episode_id, cell or outcome")
    return str(record.get("schema")), episode_id, cell, outcome


def events(text: str) -> Iterator[dict[str, Any]]:
    """A record line's events one by one, decoded by offset (the list follows ``report``) and
    each checked against the closed set of types as it is decoded, so a reader that stops
    early — the recovery classifier, the first fault event — decodes no more."""
    try:
        for i, event in enumerate(_events(text)):
            kind = event.get("type") if isinstance(event, dict) else None
            if kind not in EVENT_TYPES:
                raise RecordError(f"events[{i}] has unknown type {kind!r:.40}")
            yield event
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"the event log is {_unparseable(exc).reason}") from None


def _events(text: str) -> Iterator[Any]:
    start = text.find('"events": [', text.find('"report": '))
    if start < 0:
        yield from _DECODER.decode(text)["events"]
        return
    i = _skip(text, start + 11)
    while text[i] != "]":
        event, i = _DECODER.raw_decode(text, i)
        yield event
        i = _skip(text, i)
        if text[i] == ",":
            i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    while text[i] in " \t\r\n":
        i += 1
    return i


def record_of(text: str) -> EpisodeRecord:
    """The whole record of a line the analysis loaded (judged at load by its cell and outcome);
    a :class:`RecordError` if the rest of the line is not strict JSON."""
    try:
        return cast("EpisodeRecord", _DECODER.decode(text))
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"the record is {_unparseable(exc).reason}") from None


# -- versions, closed sets, the whole shape ----------------------------------------------------


def version_problem(schema: Any) -> str | None:
    """Why a record of version ``schema`` cannot be read here (``None``: it can)."""
    if schema in READABLE:
        return None
    if isinstance(schema, str) and schema.startswith(SCHEMA_PREFIX):
        return (f"schema {schema[:60]!r} is not one this LIMBO reads ({', '.join(READABLE)}); "
                f"read it with the LIMBO version that wrote it")
    return f"no {SCHEMA_PREFIX}N schema"


def _termination(termination: Any) -> str:
    return f"outcome.termination {termination!r:.40} is not one of {', '.join(TERMINATIONS)}"


def closed_set_problem(record: Mapping[str, Any]) -> str | None:
    """The cheap checks a reader makes on every record it parses: a known version, a known
    termination, known event types (the full shape is :func:`validate`'s)."""
    problem = version_problem(record.get("schema"))
    if problem is not None:
        return problem
    outcome = record.get("outcome")
    termination = outcome.get("termination") if isinstance(outcome, dict) else None
    if termination not in TERMINATIONS:
        return _termination(termination)
    for i, event in enumerate(record.get("events") or ()):
        kind = event.get("type") if isinstance(event, dict) else None
        if kind not in EVENT_TYPES:
            return f"events[{i}] has unknown type {kind!r:.40}"
    return None


def validate(record: Any, where: str = "the record") -> EpisodeRecord:
    """``record`` checked against the whole shape (:data:`limbo.log.records.EDGE`) and handed
    back; a :class:`RecordError` naming the first problem otherwise (a version this LIMBO does
    not read is said as such)."""
    problem = version_problem(record.get("schema") if isinstance(record, dict) else None)
    if problem is not None:
        raise RecordError(f"{where}: {problem}")
    from pydantic import ValidationError

    from limbo.log.records import EDGE

    try:
        EDGE.validate_python(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{where} is not a valid {SCHEMA} record: {at}: {first['msg']} "
                          f"({exc.error_count()} problem(s))") from None
    return cast("EpisodeRecord", record)
