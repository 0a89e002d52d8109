"""Which of the server's tools ``limbo conform`` checks, and what it knows of each.

A tool the world file declares is known from the world file: whether it writes, which
arguments make its business effect, whether it takes a key, which declared read shows its
effect. Any other tool the server lists is known from its annotations, as a prior: a tool
without ``readOnlyHint: true`` is a candidate write (MCP's default for a missing hint is
``false``). Either way each verdict says which source it rests on.

Every candidate write is declared to the proxy's ledger, so that the acknowledged calls of
conform are kept as those of an agent are: a tool the world file does not declare gets a
declaration made from its input schema (its required arguments are its effect, its key
support ``none``: conform finds out), in a proxied service of its own, ``conform``. A tool whose
name or arguments no world file could declare (``Create-Charge``, an argument of no JSON type)
is called untracked: its effects are still observed, but the ledger does not hold its calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from limbo.base.errors import UsageError
from limbo.base.hashing import canonical_json, digest
from limbo.proxy.conform.values import Schema, world_schema
from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.sim.tools import KEY_FIELD
from limbo.sim.worldfile.format import (
    FIELD_NAME,
    OP_NAME,
    ServiceDef,
    WorldFile,
    WorldInfo,
    Write,
)

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
OWN_SERVICE = "conform"
"""The proxied service the undeclared candidate writes are declared in."""
_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
          "object": "object", "array": "list"}


@dataclass(frozen=True)
class Subject:
    """One tool under test."""

    wire: str
    """The server's name of it (what conform calls)."""
    tool: DeclaredTool | None
    """Its declaration in the ledger's catalog (``None``: untracked)."""
    source: Literal["world", "annotations"]
    writes: bool
    keyed: bool
    """It takes an ``idempotency_key`` (its schema lists one, or the world file says so)."""
    key_required: bool
    hints: dict[str, bool]
    schema: Schema
    """What its arguments are made from."""
    args_from: Literal["world", "input schema"]
    prefer: list[str] = field(default_factory=list)
    """The business arguments, varied first for a conflicting call."""
    key_scope: str | None = None
    """The key scope the world file states explicitly (``service`` / ``tool``)."""

    @property
    def name(self) -> str:
        """The ledger's name of it (its declared name; its server's name when untracked)."""
        return self.tool.name if self.tool is not None else self.wire


def catalog_for(world: WorldFile | None, identity: str | None,
                listed: list[dict[str, Any]]) -> tuple[Catalog, set[str]]:
    """The ledger's catalog: the world file's proxied services (if any), and a service of
    declarations made from the schemas of the candidate writes it does not declare (their
    names: the second item)."""
    base = Catalog(world, identity or "") if world is not None else None
    if base is not None:
        base.bind(str(t.get("name")) for t in listed)
    own: dict[str, dict[str, Any]] = {}
    for tool in listed:
        name = str(tool.get("name"))
        if (base is None or base.of(name) is None) and not _hints(tool).get("readOnlyHint"):
            write = _declared_write(tool)
            if write is not None:
                own[name] = write
    proxied = {} if world is None else {n: s for n, s in world.services.items() if s.proxy}
    service = next(n for n in (OWN_SERVICE, f"{OWN_SERVICE}2", f"{OWN_SERVICE}3")
                   if n not in proxied)
    made = ServiceDef.model_validate({"proxy": True, "writes": own})
    stamp = f"{OWN_SERVICE}@{digest(canonical_json(own), 12)}"
    if world is None:
        catalog = Catalog(WorldFile(world=WorldInfo(name=OWN_SERVICE),
                                    services={service: made}), stamp)
    else:
        catalog = Catalog(world.model_copy(update={"services": {**proxied, service: made}}),
                          f"{identity}+{stamp}" if own else str(identity))
    catalog.bind(str(t.get("name")) for t in listed)
    return catalog, set(own)


def _declared_write(tool: dict[str, Any]) -> dict[str, Any] | None:
    """A world file write for an undeclared tool, from its input schema (``None``: none can be
    declared; the tool is called untracked)."""
    import re

    name, schema = str(tool.get("name")), _schema(tool)
    props = schema.get("properties") or {}
    required = [n for n in schema.get("required") or () if n != KEY_FIELD and n in props]
    effect = required or [n for n in props if n != KEY_FIELD]
    types = {n: _TYPES.get(_type(props[n]) or "") for n in effect}
    if not re.match(OP_NAME, name) or not effect or None in types.values() or \
            not all(re.match(FIELD_NAME, n) for n in effect):
        return None
    description = str(tool.get("description") or name)[:2000] or name
    args = {n: {"type": t, **_items(props[n], t)} for n, t in types.items()}
    try:  # a declaration the world file's rules refuse: the tool is called untracked
        Write.model_validate({"description": description, "effect": effect, "args": args})
    except ValidationError:
        return None
    return {"description": description, "effect": effect, "args": args}


def _items(spec: Any, kind: str | None) -> dict[str, Any]:
    """What a list argument holds, as a world file says it (``{}``: not a list)."""
    if kind != "list" or not isinstance(spec, dict):
        return {}
    inner = _type(spec.get("items")) or "object"
    return {"items": inner if inner in ("string", "integer", "number", "boolean") else "object"}


def _type(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return None
    for option in spec.get("anyOf") or ():
        if isinstance(option, dict) and option.get("type") not in (None, "null"):
            return _type(option)
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if isinstance(kind, str) else None


def _schema(tool: dict[str, Any]) -> Schema:
    found = tool.get("inputSchema")
    return found if isinstance(found, dict) else {"type": "object", "properties": {}}


def _hints(tool: dict[str, Any]) -> dict[str, bool]:
    found = tool.get("annotations")
    found = found if isinstance(found, dict) else {}
    return {h: found[h] for h in HINTS if isinstance(found.get(h), bool)}


def subjects(listed: list[dict[str, Any]], catalog: Catalog, own: set[str],
             chosen: list[str]) -> list[Subject]:
    """The tools under test: those named with ``--tool`` (by the server's or the declared
    name; a :class:`UsageError` for a name the server does not offer), else every tool."""
    offered = {str(t.get("name")): t for t in listed}
    names = list(offered)
    if chosen:
        names = []
        for want in chosen:
            found = [n for n in offered if n == want or ((d := catalog.of(n)) is not None and
                                                        d.name == want)]
            if not found:
                raise UsageError(f"--tool {want}: the server offers no such tool; it offers "
                                 f"{', '.join(offered) or 'none'}")
            names += [n for n in found if n not in names]
    return [_subject(offered[n], catalog, n not in own) for n in names]


def _subject(tool: dict[str, Any], catalog: Catalog, world: bool) -> Subject:
    name, schema, hints = str(tool.get("name")), _schema(tool), _hints(tool)
    declared = catalog.of(name)
    from_world = world and declared is not None
    write = declared.write if declared is not None else None
    props = schema.get("properties") or {}
    keyed = KEY_FIELD in props or (from_world and write is not None and write.key != "none")
    key_required = KEY_FIELD in (schema.get("required") or ())
    if from_world and declared is not None:
        spec = write.args if write is not None else declared.read.args if declared.read else {}
        args_schema = world_schema(spec) if spec else schema
        return Subject(name, declared, "world", declared.kind == "write", keyed, key_required,
                       hints, args_schema, "world" if args_schema is not schema else
                       "input schema", list(write.effect) if write is not None else [],
                       write.key_scope if write is not None and "key_scope" in
                       write.model_fields_set else None)
    return Subject(name, declared, "annotations", not hints.get("readOnlyHint", False), keyed,
                   key_required, hints, schema, "input schema")
