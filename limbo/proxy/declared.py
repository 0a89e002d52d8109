"""What the proxy knows of the upstream's tools: the world file's proxy-only services.

Each declared operation becomes the same :class:`~limbo.sim.service.OpSpec` a simulated world
file service gets (:func:`limbo.sim.worldfile.build.build_services`), so the write class, the key
rules, the batch units and the read that shows a write are derived once, by the code the
sandbox uses; the proxy never plays them. A declared tool ``<service>_<op>`` is matched to the
upstream tool of that name, or of the bare operation name ``<op>`` (a team's server rarely
prefixes its tools); an agent may call it by either name, and the ledger and the task's intents
always use the declared name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from limbo.base.errors import UsageError
from limbo.sim.service import OpSpec
from limbo.sim.worldfile.build import build_services
from limbo.sim.worldfile.check import checked
from limbo.sim.worldfile.format import Read, ServiceDef, WorldFile, Write
from limbo.sim.worldfile.kit import DIGEST_CHARS


@dataclass(frozen=True)
class DeclaredTool:
    """One declared tool of a proxied service."""

    name: str
    """The declared name, ``<service>_<op>`` (the ledger's and the intents' name)."""
    op: OpSpec
    write: Write | None
    read: Read | None
    service: ServiceDef

    @property
    def kind(self) -> str:
        return self.op.kind


class Catalog:
    """The proxied services of one world file, and the names the upstream gives their tools."""

    def __init__(self, world: WorldFile, identity: str) -> None:
        self.world, self.identity = world, identity
        proxied = {n: s for n, s in world.services.items() if s.proxy}
        if not proxied:
            raise UsageError(f"world {identity} declares no proxy-only service: mark the "
                             f"service limbo proxy fronts with proxy = true")
        built = build_services(world.model_copy(update={"services": proxied}), identity)
        self.tools: dict[str, DeclaredTool] = {}
        for name, cls in built.items():
            svc = proxied[name]
            for op in cls.ops.values():
                self.tools[op.tool] = DeclaredTool(op.tool, op, svc.writes.get(op.name),
                                           svc.reads.get(op.name), svc)
        self.upstream: dict[str, str] = {}
        """Upstream tool name -> declared name (set by :meth:`bind`)."""

    def bind(self, offered: Iterable[str]) -> list[str]:
        """Match the upstream's tool names to the declared tools; the warnings to print: a
        declared tool the upstream lacks, an upstream tool no declaration covers (its calls are
        forwarded and logged, but are not in the ledger)."""
        names = list(offered)
        bare: dict[str, list[str]] = {}
        for tool in self.tools.values():
            bare.setdefault(tool.op.name, []).append(tool.name)
        self.upstream = {}
        for name in names:
            if name in self.tools:
                self.upstream[name] = name
            elif len(bare.get(name, ())) == 1:
                self.upstream[name] = bare[name][0]
        bound = set(self.upstream.values())
        warnings = [f"declared tool {t} is not offered by the upstream" for t in self.tools
                    if t not in bound]
        warnings += [f"upstream tool {n} is not declared in the world file: its calls are "
                     f"forwarded untracked (a write there is not in the ledger)"
                     for n in names if n not in self.upstream]
        return warnings

    def of(self, name: str) -> DeclaredTool | None:
        """The declared tool a name the agent calls stands for — the upstream's name of it, or
        its declared name ``<service>_<op>`` — (``None``: undeclared, or not offered)."""
        declared = self.upstream.get(name)
        if declared is None and name in self.tools and name in self.upstream.values():
            declared = name
        return self.tools[declared] if declared is not None else None

    def wire_name(self, declared: str) -> str:
        """The upstream's name of a declared tool (its declared name when unbound)."""
        for wire, name in self.upstream.items():
            if name == declared:
                return wire
        return declared

    def writes(self) -> list[DeclaredTool]:
        return [t for t in self.tools.values() if t.kind == "write"]


def load(path: Path) -> Catalog:
    """The world file at ``path`` (checked: a :class:`UsageError` placing its first problem)."""
    world, source = checked(path)
    return Catalog(world, f"{world.world.name}@{source.digest[:DIGEST_CHARS]}")
