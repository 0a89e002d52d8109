"""Reconciliation: what the upstream's own state says about the writes the ledger cannot settle
from their answers — a write whose answer was not a clean success (an error, no answer, a
crash), and a success that carried no id (an answer in prose).

Each such write is looked up through the read that shows it (:func:`limbo.sim.readback.resolve`,
the sandbox's own read-back rules), by its business arguments (its effect fields; a batch unit
by unit; a change to a record by the record's id and the values it writes). An item that shows
the effect is the write's only if it was not there before the episode (the snapshot,
:mod:`limbo.proxy.snapshot`) and no other write holds it — by its id where items carry one,
else by count: two items with the same arguments are two effects. Writes are settled in time
order: first the successes that carried no id take their items, then the writes in doubt, the
earliest first. A write in doubt with an item left for it is ``recovered``; with none,
``absent``. Where that cannot decide — no declared read shows the write; no snapshot of that
read from before the episode, and an item that might have predated it — the write is
``unverifiable``, with the reason, and counted nowhere: never a guess.

A read that gets no answer (the upstream died, a protocol error) decides nothing: its writes
stay in doubt and the episode is not recorded — ``limbo proxy --recover`` settles it once the
upstream answers. A read the upstream answers with an error is the same while serving; under
``--recover`` (``final``) its writes are ``unverifiable``, with the upstream's error.

Last, the argument-free reads are read again: items that appeared during the episode and that
no write in the ledger accounts for are reported as *unattributed* (an undeclared write tool, or
another client of the same server).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.base.hashing import canonical_json
from limbo.proxy.declared import Catalog
from limbo.proxy.ledger import ABSENT, COMMITTED, RECOVERED, UNVERIFIABLE, Ledger, LedgerWrite
from limbo.proxy.shapes import items, payload, readable
from limbo.proxy.snapshot import Items, Listing, Snapshot
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.sim.readback import ReadPlan, resolve
from limbo.sim.service import fits

UNDECIDED = "undecided"


def _id(item: dict[str, Any], field: str | None) -> str | None:
    value = item.get(field) if field is not None else None
    return str(value) if value is not None else None


@dataclass
class Listed:
    """The items one read lists, and which of them writes of this episode took."""

    listed: Items
    before: Listing | None
    ids: set[str] = field(default_factory=set)
    anonymous: dict[str, int] = field(default_factory=dict)
    """Match -> how many id-less items that show it were credited."""

    def credit(self, match: dict[str, Any], id_field: str | None, held: set[str]
               ) -> tuple[str, str | None]:
        """A new item showing ``match`` for one write, taken: ``("found", its id)``,
        ``("absent", None)``, or ``(UNDECIDED, None)`` when nothing says whether an item that
        shows it predates the episode."""
        old = ([i for i in self.before.items if fits(i, match)]
               if self.before is not None else [])
        taken = held | self.ids | {x for i in old if (x := _id(i, id_field)) is not None}
        named = [x for i in self.listed if fits(i, match) and (x := _id(i, id_field)) is not None
                 and x not in taken]
        key = canonical_json(match)
        anonymous = (sum(1 for i in self.listed if fits(i, match) and _id(i, id_field) is None)
                     - sum(1 for i in old if _id(i, id_field) is None)
                     - self.anonymous.get(key, 0))
        if self.before is None and (named or anonymous > 0):
            return UNDECIDED, None
        if named:
            self.ids.add(named[0])
            return "found", named[0]
        if anonymous > 0:
            self.anonymous[key] = self.anonymous.get(key, 0) + 1
            return "found", None
        return "absent", None


class Reconciler:
    """Settles a ledger's writes that their answers did not, against the upstream."""

    def __init__(self, upstream: Upstream, catalog: Catalog, ledger: Ledger,
                 before: Snapshot, final: bool = False) -> None:
        self.upstream, self.catalog, self.ledger, self.before = upstream, catalog, ledger, before
        self.final = final
        self.unreachable: list[str] = []
        """Why a read the reconciliation needed decided nothing (its writes stay in doubt)."""
        self._pools: dict[str, Listed | str | None] = {}

    async def settle(self, t: float) -> list[dict[str, Any]]:
        """The ``reconciled`` journal entries, applied to the ledger as they are made (so a
        later write cannot take an item an earlier one took): first the ids of successes
        that carried none, then one per write in doubt that a read could decide."""
        out = []
        doubt = {w.tool for w in self.ledger.uncertain()}
        for write in [w for w in self.ledger.writes.values() if self._unnamed(w, doubt)]:
            entry = await self._identify(write, t)
            if entry is not None:
                self.ledger.apply(entry)
                out.append(entry)
        for write in self.ledger.uncertain():
            found = await self._one(write)
            if found is not None:
                entry = {"type": "reconciled", "n": write.n, "t": t, **found}
                self.ledger.apply(entry)
                out.append(entry)
        return out

    def _unnamed(self, write: LedgerWrite, doubt: set[str]) -> bool:
        """A success whose answer carried no id, which must take its item before the writes
        in doubt do (or whose id the read can give)."""
        tool = self.catalog.tools[write.tool]
        return (write.state == COMMITTED and tool.write is not None
                and tool.write.target is None and None in write.object_ids
                and (tool.write.id_field is not None or write.tool in doubt))

    async def _identify(self, write: LedgerWrite, t: float) -> dict[str, Any] | None:
        """The ids of a success that carried none, read by its arguments (``None``: not
        decided; the effect stays in the ledger without an id)."""
        tool = self.catalog.tools[write.tool]
        assert tool.write is not None
        plan = resolve(tool.op, write.args)
        pool = await self._pool(plan) if plan is not None else None
        if plan is None or not isinstance(pool, Listed):
            return None
        held = self.ledger.claimed(write.tool)
        ids = list(write.object_ids)
        for i, match in enumerate(_matches(plan)):
            if i < len(ids) and ids[i] is None:
                how, found = pool.credit(match, tool.write.id_field, held)
                ids[i] = found if how == "found" else None
        if ids == write.object_ids:
            return None
        return {"type": "reconciled", "n": write.n, "t": t, "state": COMMITTED,
                "object_ids": ids, "units": write.units,
                "why": f"its answer carried no id; read in {plan.tool} by its arguments"}

    async def _one(self, write: LedgerWrite) -> dict[str, Any] | None:
        tool = self.catalog.tools[write.tool]
        plan = resolve(tool.op, write.args)
        if plan is None:
            return {"state": UNVERIFIABLE, "why": f"no declared read lists {write.tool}"}
        pool = await self._pool(plan)
        if not isinstance(pool, Listed):
            return None if pool is None else {"state": UNVERIFIABLE, "why": pool}
        w = tool.write
        assert w is not None
        if w.action in ("update", "delete") and w.target is not None:
            return self._change(write, str(write.args.get(w.target)), plan, pool)
        held = self.ledger.claimed(write.tool)
        results = [pool.credit(m, w.id_field, held) for m in _matches(plan)]
        if any(how == UNDECIDED for how, _ in results):
            return {"state": UNVERIFIABLE, "why": _no_snapshot(plan)}
        kept = [i for i, (how, _) in enumerate(results) if how == "found"]
        if not kept:
            return {"state": ABSENT, "why": "not seen in " + plan.tool}
        found: dict[str, Any] = {"state": RECOVERED, "why": "seen in " + plan.tool,
                                 "object_ids": [results[i][1] for i in kept],
                                 **self.ledger.misdeclared(write)}
        if plan.units is not None:
            found |= {"units": kept, "why": f"{len(kept)} of {len(plan.units)} units seen in "
                                            f"{plan.tool}"}
        return found

    def _change(self, write: LedgerWrite, target: str, plan: ReadPlan, pool: Listed
                ) -> dict[str, Any]:
        """A change to an existing record (a refund): recovered if the record shows it now,
        did not before the episode, and no write in the ledger made it."""
        shown = any(fits(i, plan.spec.match) for i in pool.listed)
        if target in self.ledger.claimed(write.tool):
            return {"state": ABSENT, "why": "a write in the ledger made this change"}
        if pool.before is None:
            return ({"state": UNVERIFIABLE, "why": _no_snapshot(plan)} if shown
                    else {"state": ABSENT, "why": "not seen in " + plan.tool})
        if any(fits(i, plan.spec.match) for i in pool.before.items):
            return {"state": ABSENT, "why": "the record showed this change before the episode"}
        return ({"state": RECOVERED, "object_ids": [target], "why": "seen in " + plan.tool}
                if shown else {"state": ABSENT, "why": "not seen in " + plan.tool})

    async def _pool(self, plan: ReadPlan) -> Listed | str | None:
        """The items ``plan``'s read lists now (read once per settling); a reason when the
        upstream answered it with an error under ``final``; ``None`` when it decided nothing."""
        key = canonical_json([plan.tool, plan.args])
        if key not in self._pools:
            self._pools[key] = await self._read(plan)
        return self._pools[key]

    async def _read(self, plan: ReadPlan) -> Listed | str | None:
        try:
            answer = payload(await self.upstream.read(self.catalog.wire_name(plan.tool),
                                                      plan.args))
        except UpstreamLost as exc:
            self.unreachable.append(f"{plan.tool} did not answer: {exc}")
            return None
        if not answer.get("ok"):
            why = f"{plan.tool} failed: {str(answer)[:200]}"
            if self.final:
                return why
            self.unreachable.append(why)
            return None
        return Listed(plan.spec.items(readable(answer)),
                    self.before.covering(plan.tool, plan.args))

    async def unattributed(self) -> dict[str, int]:
        """Argument-free read -> items that appeared during the episode that no write in the
        ledger accounts for."""
        out: dict[str, int] = {}
        held = {i for w in self.ledger.writes.values() if w.in_ledger
                for i in w.object_ids if i is not None}
        for listing in self.before.argument_free():
            tool = self.catalog.tools[listing.tool]
            assert tool.read is not None
            fields = {w.id_field for op in tool.read.lists
                      if (w := tool.service.writes.get(op)) is not None and w.id_field}
            try:
                answer = payload(await self.upstream.read(self.catalog.wire_name(listing.tool),
                                                          {}))
            except UpstreamLost:
                continue
            known = {x for i in listing.items for f in fields if (x := _id(i, f)) is not None}
            new = [i for i in items(answer)
                   if not any(_id(i, f) in known | held for f in fields)]
            if fields and new:
                out[listing.tool] = len(new)
        return out


def _matches(plan: ReadPlan) -> list[dict[str, Any]]:
    """What an item must hold to show the write: its match, or one per batch unit."""
    if plan.units is None:
        return [plan.spec.match]
    return [{**plan.spec.match, **u} if isinstance(u, dict) else plan.spec.match
            for u in plan.units]


def _no_snapshot(plan: ReadPlan) -> str:
    return (f"{plan.tool} lists an item that shows it, and nothing was read through "
            f"{plan.tool} {canonical_json(plan.args)} before the episode to tell whether that "
            f"item predates it")
