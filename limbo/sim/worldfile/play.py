"""How LIMBO plays a declared service: a few generic actions over versioned tables.

A write *creates* a record (one per unit, for a batch), *updates* one (refusing with 409 when
the record does not hold what ``when``/``when_args`` require: the repeat of a refund, a
status change from the wrong status), *deletes* one, or *upserts* one by a key argument. A
read lists one kind of record, filtered, searched, ordered and capped. Records live in
:class:`~limbo.sim.service.VersionedTable` objects like the built-in services' rows, so read lags and
stale replicas work the same way.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from limbo.sim.results import Result, error, ok
from limbo.sim.service import Args, OpContext, Service, VersionedTable, View
from limbo.sim.worldfile.format import Read, ServiceDef, Write


class PlayedService(Service):
    """Base of the services built from a world file (:mod:`limbo.sim.worldfile.build` makes one
    subclass per declared service, with its operations)."""

    decl: ClassVar[ServiceDef]
    world: ClassVar[str]
    """The identity of the world that declared it (``name@digest``)."""
    id_fields: ClassVar[dict[str, str]]
    """Record kind -> the field holding a record's id."""
    prefixes: ClassVar[dict[str, str]]

    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.tables: dict[str, VersionedTable] = {kind: VersionedTable() for kind in self.id_fields}
        self.keyed: dict[str, dict[Any, str]] = {kind: {} for kind in self.id_fields}
        """Upserted records by (kind, key value)."""

    # -- writes --------------------------------------------------------------------------------

    def write(self, name: str, ctx: OpContext, args: Args) -> Result:
        w = self.decl.writes[name]
        if w.batch is not None:
            return self._batch(w, ctx, args)
        action = {"create": self._create, "update": self._update, "delete": self._delete,
                  "upsert": self._upsert}[w.action]
        return action(w, ctx, copy.deepcopy(args))

    def _kind(self, w: Write) -> str:
        assert w.record is not None, "checked at load: a played write names its record kind"
        return w.record

    def _create(self, w: Write, ctx: OpContext, args: Args) -> Result:
        kind = self._kind(w)
        object_id = self.mint(self.prefixes[kind])
        row = {self.id_fields[kind]: object_id, **args, **w.set}
        self.tables[kind].put(object_id, row, ctx.now)
        ctx.commit(effect_of(w, args), object_id)
        return ok(**row)

    def _batch(self, w: Write, ctx: OpContext, args: Args) -> Result:
        assert w.batch is not None
        kind, units = self._kind(w), list(args[w.batch.units])
        id_field = self.id_fields[kind]
        ids = list(ctx.prior_units)
        left = units[len(ids):]
        if w.batch.atomic and ctx.unit_limit is not None and ctx.unit_limit < len(left):
            return error("server_error", "internal error: the batch failed; nothing was added")
        basis = {k: v for k, v in args.items() if k != w.batch.units}
        shown = effect_of(w, args)
        shown.pop(w.batch.units, None)
        for item in left:
            ctx.commit({**shown, w.batch.unit: copy.deepcopy(item)}, None)
            object_id = self.mint(self.prefixes[kind])
            row = {id_field: object_id, **copy.deepcopy(basis), **item, **w.set}
            self.tables[kind].put(object_id, row, ctx.now)
            ctx.effects[-1].object_id = object_id
            ids.append(object_id)
        return ok(**{f"{id_field}s": ids, "count": len(units)})

    def _target(self, w: Write, args: Args) -> tuple[str, dict[str, Any]] | Result:
        """The record a change acts on, or the 404 when there is none (or it does not match
        ``find``)."""
        kind = self._kind(w)
        assert w.target is not None
        object_id = str(args[w.target])
        row = self.tables[kind].current(object_id)
        if row is None or any(row.get(f) != args[f] for f in w.find):
            return error("not_found", f"no {kind} {object_id}")
        return object_id, row

    def _update(self, w: Write, ctx: OpContext, args: Args) -> Result:
        found = self._target(w, args)
        if isinstance(found, dict):
            return found
        object_id, row = found
        wanted = {**w.when, **{f: args[a] for f, a in w.when_args.items()}}
        differ = {f: row.get(f) for f, v in wanted.items() if row.get(f) != v}
        if differ:
            said = ", ".join(f"{f} is {v!r}, not {wanted[f]!r}" for f, v in differ.items())
            return error("conflict", f"{self._kind(w)} {object_id}: {said}", current=differ)
        new = {**row, **w.set, **{f: args[a] for f, a in w.set_args.items()}}
        self.tables[self._kind(w)].put(object_id, new, ctx.now)
        ctx.commit(effect_of(w, args), object_id, reverses=object_id if w.reverses else None)
        return ok(**new)

    def _delete(self, w: Write, ctx: OpContext, args: Args) -> Result:
        found = self._target(w, args)
        if isinstance(found, dict):
            return found
        object_id, row = found
        wanted = {**w.when, **{f: args[a] for f, a in w.when_args.items()}}
        differ = {f: row.get(f) for f, v in wanted.items() if row.get(f) != v}
        if differ:
            return error("conflict", f"{self._kind(w)} {object_id} cannot be deleted now",
                         current=differ)
        self.tables[self._kind(w)].put(object_id, None, ctx.now)
        ctx.commit(effect_of(w, args), object_id, reverses=object_id if w.reverses else None)
        return ok(deleted=object_id)

    def _upsert(self, w: Write, ctx: OpContext, args: Args) -> Result:
        kind = self._kind(w)
        assert w.upsert_key is not None
        key = args[w.upsert_key]
        object_id = self.keyed[kind].get(key)
        row = {**args, **w.set}
        if object_id is not None:
            old = self.tables[kind].current(object_id)
            if old is not None and {k: v for k, v in old.items()
                                    if k != self.id_fields[kind]} == row:
                return ok(**old, changed=False)
        else:
            object_id = self.keyed[kind][key] = self.mint(self.prefixes[kind])
        row = {self.id_fields[kind]: object_id, **row}
        self.tables[kind].put(object_id, row, ctx.now)
        ctx.commit(effect_of(w, args), object_id)
        return ok(**row, changed=True)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, name: str, view: View, args: Args) -> Result:
        r = self.decl.reads[name]
        kind = self.decl.writes[r.lists[0]].record
        assert kind is not None
        rows = [row for _, row in self.tables[kind].scan(view) if _keeps(r, row, args)]
        if r.order == "newest":
            rows.reverse()
        cap = r.max_items
        if r.limit is not None and args.get(r.limit) is not None:
            cap = min(cap, int(args[r.limit]))
        return ok(items=rows[:cap])


def _keeps(r: Read, row: dict[str, Any], args: Args) -> bool:
    """Whether a read with ``args`` shows ``row``."""
    for field in r.filter:
        if args.get(field) is not None and row.get(field) != args[field]:
            return False
    if r.search is not None:
        query = str(args.get(r.search.arg) or "").lower()
        return any(query in str(row.get(f, "")).lower() for f in r.search.fields)
    return True


def effect_of(w: Write, args: Args) -> Args:
    """The effect a write commits: its effect fields' values."""
    return {f: args.get(f) for f in w.effect}
