"""Checking a world file: its shape (the pydantic models, strict) and its rules — names that
exist (:mod:`~limbo.sim.worldfile.rules`, :mod:`~limbo.sim.worldfile.template_rules`), values
and fields the world can act on (:mod:`~limbo.sim.worldfile.field_rules`), intents fixed
before the agent runs and step values their tools accept
(:mod:`~limbo.sim.worldfile.plan_rules`) — every problem with its file, line and key path, in
one pass. Running each template's plan once is the last check, a floor up
(:mod:`limbo.episode.world_trial`).

:func:`check` never raises for a bad file: what is wrong is in the returned source's
``problems``. :func:`checked` is the same for callers that need a usable world (a
:class:`~limbo.sim.worldfile.source.WorldFileError` naming the first problem otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from limbo.sim.worldfile.field_rules import check_fields
from limbo.sim.worldfile.format import WorldFile
from limbo.sim.worldfile.rules import ToolFacts, check_services, world_tools
from limbo.sim.worldfile.source import Source, WorldFileError, read
from limbo.sim.worldfile.template_rules import check_templates
from limbo.sim.worldfile.values import Fits

MAX_PROBLEMS = 200
"""A file with more problems than this is reported up to here (a wrong file, most likely)."""


def check(path: Path) -> tuple[WorldFile | None, Source]:
    """The world at ``path`` and its source; the world is ``None`` when there are problems."""
    return check_source(read(path))


def check_source(source: Source, tasks: bool = True) -> tuple[WorldFile | None, Source]:
    """:func:`check` of a world already read (``tasks``: it must declare a template — not
    for ``limbo conform``, which reads only its tools)."""
    if source.problems:
        return None, source
    try:
        world = WorldFile.model_validate(source.raw)
    except ValidationError as exc:
        _report_errors(source, exc.errors(include_url=False)[:MAX_PROBLEMS])
        source.problems.sort(key=lambda p: (p.file, p.line))
        return None, source
    registered = _registered()
    check_services(world, set(registered[0]), source.problem)
    for name, svc in world.services.items():
        check_fields(svc, name, source.problem)
    tools = {**registered[1], **world_tools(world)}
    check_templates(world, tools, registered[2], source.problem,
                    values=not source.problems, needed=tasks)  # a step's values, once its tools' types hold
    source.problems.sort(key=lambda p: (p.file, p.line))
    del source.problems[MAX_PROBLEMS:]
    return (None if source.problems else world), source


def checked(path: Path | Source, tasks: bool = True) -> tuple[WorldFile, Source]:
    """The world at ``path`` (or already read), or a :class:`WorldFileError` listing its
    problems (``tasks``: as for :func:`check_source`)."""
    world, source = check_source(path if isinstance(path, Source) else read(path), tasks)
    if world is None:
        raise WorldFileError(source.problems)
    return world, source


def _registered() -> tuple[list[str], dict[str, ToolFacts], set[str]]:
    """LIMBO's own services, their tools and its templates (plugins' included): a world may
    use the tools and must not reuse the names."""
    from limbo.base.registry import entries
    from limbo.sim.tasks import templates
    from limbo.sim.tools import KEY_FIELD, toolset

    tools: dict[str, ToolFacts] = {}
    for name, spec in toolset("native").items():
        if spec.op is None:
            continue
        fields = {n: f for n, f in spec.model.model_fields.items() if n != KEY_FIELD}
        tools[name] = ToolFacts(spec.kind, frozenset(fields),
                                frozenset(n for n, f in fields.items() if f.is_required()),
                                None, spec.op.batch is not None, fits=Fits(spec.model))
    return list(entries("service")), tools, set(templates())


def clean_path(raw: Any, loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """``loc`` of a validation error as a path in the file: the parts pydantic adds for the
    members of a union (``float``, ``literal['unavailable']``, ``HonouredWhen``) are dropped,
    and the path stops at the first part the file does not have (a missing or unknown
    field)."""
    path: list[str | int] = []
    node = raw
    for part in loc:
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif _is_member(part):
            continue
        else:
            path.append(part)
            break
    return tuple(path)


def _is_member(part: str | int) -> bool:
    """Whether ``part`` names a union member (``float``, ``constrained-float``,
    ``literal['unavailable']``, ``HonouredWhen``) rather than a key of the file."""
    text = str(part)
    return ("[" in text or text[:1].isupper() or _MEMBER.fullmatch(text) is not None
            or text in ("str", "int", "float", "bool", "list", "dict"))


_MEMBER = re.compile(r"[a-z]+(-[a-z]+)+")


def _report_errors(source: Source, errors: list[Any]) -> None:
    """One problem per place: the errors pydantic gives for each member of a union at one
    place are joined into one line."""
    by_path: dict[tuple[str | int, ...], list[Any]] = {}
    for err in errors:
        by_path.setdefault(clean_path(source.raw, err["loc"]), []).append(err)
    for path, found in by_path.items():
        texts = list(dict.fromkeys(_text(path, err) for err in found))
        source.problem(path, "; or ".join(texts[:4]))


def _text(path: tuple[str | int, ...], err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"unknown field {str(path[-1])!r}"
    if kind == "missing":
        return f"missing required field {str(path[-1])!r}"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind in _UNQUOTED and isinstance(err.get("input"), str):
        return f"{err['msg']}: write {_UNQUOTED[kind]}, without quotes"
    return str(err["msg"])


_UNQUOTED = {"bool_type": "true or false", "int_type": "a whole number",
             "float_type": "a number"}
"""The strict types a value in quotes often means: ``proxy = "yes"`` is not ``true``."""


def describe(world: WorldFile) -> str:
    """A world in one line: its services, tools and templates, and which are proxy-only."""
    writes = sum(len(s.writes) for s in world.services.values())
    reads = sum(len(s.reads) for s in world.services.values())
    proxy = [name for name, s in world.services.items() if s.proxy]
    n = len(world.services)
    text = (f"world {world.world.name}: {n} service{'s' if n != 1 else ''} "
            f"({writes} writes, {reads} reads), {len(world.templates)} templates")
    return text + (f"; proxy only: {', '.join(proxy)}" if proxy else "")
