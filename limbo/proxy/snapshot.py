"""What the upstream's declared reads listed before the agent began: the *snapshot* (the
journal's ``baseline`` entry), so reconciliation never credits an episode's write with an
effect that was already there.

Taken once the task's setup has run and before the agent may call: every declared read that
needs no argument, and the read that shows each write the task asks for, with the task's own
arguments (a read that needs the customer is read for the task's customer). A read that fails
is left out: a write it would show is then settled without knowing what was there before —
where that matters, reconciliation says ``unverifiable`` (:mod:`limbo.proxy.reconcile`).

A snapshot of a read *covers* a later read of the same tool whose arguments include its own:
what the narrower read lists, the wider one listed too (a read with a page limit may have
listed less than the whole table; a world file declares the wider read without one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limbo.base.hashing import canonical_json
from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.proxy.shapes import items, payload
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.sim.readback import resolve
from limbo.sim.tasks import fill
from limbo.sim.tools import KEY_FIELD
from limbo.sim.worldfile.kit import WorldTemplate

Items = list[dict[str, Any]]


@dataclass(frozen=True)
class Listing:
    """What one read (a tool and its arguments) listed."""

    tool: str
    args: dict[str, Any]
    items: Items

    def covers(self, tool: str, args: dict[str, Any]) -> bool:
        return tool == self.tool and all(args.get(k) == v for k, v in self.args.items())


class Snapshot:
    """The listings taken before the episode."""

    def __init__(self, listings: list[Listing]) -> None:
        self.listings = listings

    @classmethod
    def of(cls, entry: dict[str, Any] | None) -> Snapshot:
        """The snapshot a journal's ``baseline`` entry holds (a journal of an earlier version
        keyed its argument-free reads by tool; none: an empty one)."""
        if entry is None:
            return cls([])
        if "reads" in entry:
            return cls([Listing(r["tool"], r["args"], r["items"]) for r in entry["reads"]])
        return cls([Listing(tool, {}, found) for tool, found in entry.get("items", {}).items()])

    def entry(self) -> list[dict[str, Any]]:
        return [{"tool": s.tool, "args": s.args, "items": s.items} for s in self.listings]

    def covering(self, tool: str, args: dict[str, Any]) -> Listing | None:
        """The widest listing that covers a read of ``tool`` with ``args`` (``None``: none)."""
        found = [s for s in self.listings if s.covers(tool, args)]
        return min(found, key=lambda s: len(s.args)) if found else None

    def argument_free(self) -> list[Listing]:
        return [s for s in self.listings if not s.args]


def argument_free(catalog: Catalog) -> list[DeclaredTool]:
    """The declared reads that need no argument, whose upstream tool exists."""
    bound = set(catalog.upstream.values())
    return [t for t in catalog.tools.values() if t.read is not None and t.name in bound
            and all(a.optional for a in t.read.args.values())]


def task_reads(template: WorldTemplate, env: dict[str, Any], catalog: Catalog
               ) -> list[tuple[str, dict[str, Any]]]:
    """The reads that show the task's writes, with the task's arguments (a step whose
    arguments name a value the agent's own steps produce is left out)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for step in template.steps:
        tool = catalog.tools.get(step.tool)
        if tool is None or tool.write is None:
            continue
        try:
            args = fill(step.args, env)
        except KeyError:
            continue
        plan = resolve(tool.op, {k: v for k, v in args.items() if k != KEY_FIELD})
        if plan is not None and (plan.tool, plan.args) not in out:
            out.append((plan.tool, plan.args))
    return out


async def take(upstream: Upstream, catalog: Catalog,
               wanted: list[tuple[str, dict[str, Any]]]) -> Snapshot:
    """The snapshot: every argument-free read, then each of ``wanted`` that none covers."""
    listings: list[Listing] = []
    reads: list[tuple[str, dict[str, Any]]] = [(t.name, {}) for t in argument_free(catalog)]
    reads += wanted
    seen: set[str] = set()
    for tool, args in reads:
        if any(s.covers(tool, args) for s in listings) or canonical_json([tool, args]) in seen:
            continue
        seen.add(canonical_json([tool, args]))
        try:
            answer = payload(await upstream.read(catalog.wire_name(tool), args))
        except UpstreamLost:
            continue
        if answer.get("ok"):
            listings.append(Listing(tool, args, items(answer)))
    return Snapshot(listings)
