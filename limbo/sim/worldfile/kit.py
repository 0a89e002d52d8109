"""A world's kit: the services an episode builds, the tools they offer, the templates it runs.

The built-in kit is the registry's: every registered service (plugins' included) and their
templates. A world file's kit is its own services plus the registered services its templates
call (a ticket comment after a refund), and only its own templates — so loading a world never
changes what a built-in cell sees, and a world cell sees only its world.

Worlds are loaded like plugins, once per process, and known by their identity
``name@digest``: the digest covers the file's bytes, so a changed file is another world (its
cells have other ids) while the same file loaded twice is the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.registry import entries
from limbo.sim.service import OpSpec, Service, operations
from limbo.sim.tasks import Template, templates
from limbo.sim.worldfile.build import build_services
from limbo.sim.worldfile.check import checked
from limbo.sim.worldfile.format import TemplateDef, WorldFile
from limbo.sim.worldfile.source import read
from limbo.sim.worldfile.template_rules import focal_steps, template_service

DIGEST_CHARS = 12


class WorldTemplate(Template):
    """A world file's template: a :class:`~limbo.sim.tasks.Template` whose focal writes may be a
    chosen subset of its write steps."""

    focal: list[str] | None = None

    @property
    def focal_writes(self) -> list[str]:
        found: list[str] = []
        for step in self.steps:
            if step.intent is not None and (self.focal is None or step.id in self.focal) \
                    and step.tool not in found:
                found.append(step.tool)
        return found


@dataclass(frozen=True)
class Kit:
    """What one world offers. ``identity`` is ``None`` for the built-in world."""

    identity: str | None
    services: tuple[type[Service], ...]
    """In name order (the world builds them, and offers their tools, in this order)."""
    templates: dict[str, Template]
    source: dict[str, Any] = field(default_factory=dict)
    """A world file's facts for the run's manifest: its name, digest, services, the kind of
    each tool (a reader of the records needs no world file to tell reads from writes), and
    the path it was first loaded from (the same bytes elsewhere are the same world)."""
    proxy: tuple[str, ...] = ()
    """Services declared proxy-only: a world with any cannot be run (it is served)."""
    declared: WorldFile | None = None

    @cached_property
    def ops(self) -> dict[str, OpSpec]:
        """Every operation of the kit's services, by tool name."""
        return {op.tool: op for cls in self.services for op in cls.ops.values()}

    @cached_property
    def declares_latency(self) -> bool:
        """Whether a write declares its own round trip (the world then draws them)."""
        return any(op.latency is not None for op in self.ops.values())

    def template(self, name: str) -> Template:
        """Template ``name``; a :class:`UsageError` naming the choices if unknown."""
        if name not in self.templates:
            raise UsageError(f"unknown template {name!r}; choose from: "
                             f"{', '.join(self.templates) or '(none)'}")
        return self.templates[name]

    def runnable(self) -> Kit:
        """This kit, or a :class:`UsageError` when LIMBO cannot play one of its services."""
        if self.proxy:
            raise UsageError(
                f"world {self.identity} declares proxy-only service(s) {', '.join(self.proxy)} "
                f"(their tools are declared, not simulated): `limbo run` cannot play them; "
                f"declare how each write acts (record = ..., action = ...) and drop proxy = "
                f"true, or serve the world through the proxy")
        return self


_LOADED: dict[str, Kit] = {}
"""Worlds loaded in this process, by identity (like imported plugins)."""


def kit(world: str | None) -> Kit:
    """The kit of ``world`` (an identity), or the built-in kit for ``None``."""
    if world is None:
        return _builtin(tuple(entries("service").values()))
    found = _LOADED.get(world)
    if found is None:
        raise UsageError(f"world {world} is not loaded in this process (load its file with "
                         f"--world, or `world = ...` in the grid)")
    return found


@cache
def _builtin(services: tuple[type[Service], ...]) -> Kit:
    """The registry's kit (again when a plugin registers another service)."""
    return Kit(None, services, templates())


def load_world(path: Path | str) -> Kit:
    """Check and load the world at ``path`` (a file or a directory); a
    :class:`~limbo.sim.worldfile.source.WorldFileError` naming the first problem otherwise. The
    files are read each time (their digest is the world's identity); a world already loaded
    is not checked or built again."""
    source = read(Path(path))
    info = source.raw.get("world")
    if not source.problems and isinstance(info, dict) and isinstance(info.get("name"), str):
        known = _LOADED.get(_identity(info["name"], source.digest))
        if known is not None:
            return known
    world, source = checked(source)
    identity = _identity(world.world.name, source.digest)
    proxy = tuple(name for name, svc in world.services.items() if svc.proxy)
    own = build_services(world, identity) if not proxy else {}
    used = _used(world, own)
    services = tuple(cls for _, cls in sorted({**used, **own}.items()))
    found = Kit(identity, services, _templates(world) if not proxy else {},
                {"path": str(Path(path).resolve()), "name": world.world.name,
                 "digest": source.digest, "identity": identity,
                 "services": sorted(world.services), "uses": sorted(used),
                 "tools": {op.tool: op.kind for cls in own.values() for op in cls.ops.values()}},
                proxy, world)
    _LOADED[identity] = found
    return found


def _identity(name: str, digest: str) -> str:
    return f"{name}@{digest[:DIGEST_CHARS]}"


def _used(world: WorldFile, own: dict[str, type[Service]]) -> dict[str, type[Service]]:
    """The registered services whose tools the world's templates call."""
    registered = entries("service")
    tools = {op.tool: op.service for op in operations().values()}
    called = {step.tool for t in world.templates for step in [*t.setup, *t.steps]}
    return {tools[tool]: registered[tools[tool]] for tool in sorted(called) if tool in tools
            and tools[tool] not in own}


def _templates(world: WorldFile) -> dict[str, Template]:
    out: dict[str, Template] = {}
    for t in world.templates:
        out[t.id] = _template(t, world)
    return dict(sorted(out.items()))


def _template(t: TemplateDef, world: WorldFile) -> WorldTemplate:
    focal = [s.id for s in focal_steps(t)] if t.focal is not None else None
    return WorldTemplate(id=t.id, service=template_service(t, world), prompt=t.prompt,
                         vars=t.vars, setup=t.setup, steps=t.steps, focal=focal)
