"""Reconciliation: what the upstream's own state says about the writes whose answer the proxy
did not see as a clean success.

Before the agent starts, every declared read that needs no argument is read once: the
*baseline* (kept in the journal). At the end — or when a crashed episode is recovered — each
uncertain write is looked up through the read that lists it (:func:`limbo.sim.readback.resolve`,
the sandbox's own read-back rules): an item that shows its effect, that no write already in
the ledger holds, and that was not there before the episode, is its effect (``recovered``);
none is ``absent``. A change to an existing record (a refund) counts only when the record did
not already show it in the baseline. A batch is looked up unit by unit. Reads that need an
argument cannot be read before the episode, so for them an item that matches is taken as the
write's even if it existed before; a write no declared read lists is ``unverifiable``. When the upstream does not answer a read
reconciliation needs, its writes stay uncertain and the episode is not recorded: ``limbo proxy
--recover`` settles it once the upstream is back.

Last, the baseline reads are read again: items that appeared during the episode and that no
write in the ledger accounts for are reported as *unattributed* (an undeclared write tool, or
another client of the same server).
"""

from __future__ import annotations

from typing import Any

from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.proxy.ledger import ABSENT, RECOVERED, UNVERIFIABLE, Ledger, LedgerWrite
from limbo.proxy.shapes import items, payload, readable
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.services.base import fits
from limbo.sim.readback import ReadPlan, resolve

Items = list[dict[str, Any]]


def baseline_reads(catalog: Catalog) -> list[DeclaredTool]:
    """The declared reads that need no argument, whose upstream tool exists."""
    bound = set(catalog.upstream.values())
    return [t for t in catalog.tools.values() if t.read is not None and t.name in bound
            and all(a.optional for a in t.read.args.values())]


async def baseline(upstream: Upstream, catalog: Catalog) -> dict[str, Items]:
    """Read tool -> the items it lists now (reads that fail are left out)."""
    out: dict[str, Items] = {}
    for tool in baseline_reads(catalog):
        try:
            answer = payload(await upstream.call(catalog.wire_name(tool.name), {}))
        except UpstreamLost:
            continue
        if answer.get("ok"):
            out[tool.name] = items(answer)
    return out


class Reconciler:
    """Settles a ledger's uncertain writes against the upstream."""

    def __init__(self, upstream: Upstream, catalog: Catalog, ledger: Ledger,
                 before: dict[str, Items]) -> None:
        self.upstream, self.catalog, self.ledger, self.before = upstream, catalog, ledger, before
        self.unreachable: list[str] = []
        """Why a read the reconciliation needed got no answer (its writes stay uncertain)."""

    async def settle(self, t: float) -> list[dict[str, Any]]:
        """One ``reconciled`` journal entry per uncertain write (applied to the ledger as it
        goes, so a later write cannot claim an item an earlier one took). A write whose read
        got no answer gets none: it stays uncertain, for a later ``--recover``."""
        out = []
        for write in self.ledger.uncertain():
            found = await self._one(write)
            if found is None:
                continue
            entry = {"type": "reconciled", "n": write.n, "t": t, **found}
            self.ledger.apply(entry)
            out.append(entry)
        return out

    async def _one(self, write: LedgerWrite) -> dict[str, Any] | None:
        tool = self.catalog.tools[write.tool]
        plan = resolve(tool.op, write.args)
        if plan is None:
            return {"state": UNVERIFIABLE, "why": f"no declared read lists {write.tool}"}
        try:
            answer = payload(await self.upstream.call(self.catalog.wire_name(plan.tool),
                                                      plan.args))
        except UpstreamLost as exc:
            self.unreachable.append(f"{plan.tool} did not answer: {exc}")
            return None
        seen = plan.check(readable(answer))
        if seen.visible is None:
            return {"state": UNVERIFIABLE, "why": f"{plan.tool} failed: {str(answer)[:200]}"}
        return self._judge(write, tool, plan, seen.items)

    def _judge(self, write: LedgerWrite, tool: DeclaredTool, plan: ReadPlan, found: Items) -> dict[str, Any]:
        w = tool.write
        assert w is not None
        taken = self.ledger.claimed(write.tool)
        if plan.units is not None:
            return self._units(write, w.id_field, plan, found, taken)
        if w.action in ("update", "delete") and w.target is not None:
            target = str(write.args.get(w.target))
            before = self._before(plan.tool, plan.spec.match)
            if target in taken or (before is not None and before):
                return {"state": ABSENT, "why": "the record showed this change already"}
            return ({"state": RECOVERED, "object_ids": [target], "why": "seen in " + plan.tool}
                    if found else {"state": ABSENT, "why": "not seen in " + plan.tool})
        old = self._ids_before(plan.tool, w.id_field)
        fresh = [i for i in found if _id(i, w.id_field) not in taken | old
                 or _id(i, w.id_field) is None]
        if not fresh:
            return {"state": ABSENT, "why": "not seen in " + plan.tool}
        return {"state": RECOVERED, "object_ids": [_id(fresh[0], w.id_field)],
                "why": "seen in " + plan.tool}

    def _units(self, write: LedgerWrite, id_field: str | None, plan: ReadPlan, found: Items,
               taken: set[str]) -> dict[str, Any]:
        assert plan.units is not None
        pool = [i for i in found if _id(i, id_field) is None or _id(i, id_field) not in taken]
        kept, ids = [], []
        for index, unit in enumerate(plan.units):
            match = next((i for i in pool if fits(i, unit)), None)
            if match is not None:
                pool.remove(match)
                kept.append(index)
                ids.append(_id(match, id_field))
        state = RECOVERED if kept else ABSENT
        return {"state": state, "units": kept, "object_ids": ids,
                "why": f"{len(kept)} of {len(plan.units)} units seen in {plan.tool}"}

    def _before(self, read: str, match: dict[str, Any]) -> bool | None:
        """Whether the baseline already showed ``match`` (``None``: that read has none)."""
        if read not in self.before:
            return None
        return any(fits(i, match) for i in self.before[read])

    def _ids_before(self, read: str, id_field: str | None) -> set[str]:
        return {x for i in self.before.get(read, ()) if (x := _id(i, id_field)) is not None}

    async def unattributed(self) -> dict[str, int]:
        """Baseline read -> items that appeared during the episode that no write in the ledger
        accounts for."""
        out: dict[str, int] = {}
        for read, old in self.before.items():
            tool = self.catalog.tools[read]
            assert tool.read is not None
            fields = {w.id_field for op in tool.read.lists
                      if (w := tool.service.writes.get(op)) is not None and w.id_field}
            try:
                answer = payload(await self.upstream.call(self.catalog.wire_name(read), {}))
            except UpstreamLost:
                continue
            held = {i for w in self.ledger.writes.values() if w.in_ledger
                    for i in w.object_ids if i is not None}
            known = {x for i in old for f in fields if (x := _id(i, str(f))) is not None} | held
            new = [i for i in items(answer)
                   if not any(_id(i, str(f)) in known for f in fields)]
            if fields and new:
                out[read] = len(new)
        return out


def _id(item: dict[str, Any], field: str | None) -> str | None:
    value = item.get(field) if field is not None else None
    return str(value) if value is not None else None
