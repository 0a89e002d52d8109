"""Data: a small table store. ``insert`` assigns ids (so a repeat is a second row),
``insert_many`` commits row by row and can stop part-way, ``upsert`` is idempotent by key.
Queries are strongly consistent."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from limbo.sim.results import Result, ok
from limbo.sim.service import (
    Batch,
    OpContext,
    ReadBack,
    Service,
    VersionedTable,
    View,
    read,
    service,
    write,
)

TableName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
Value = str | int | float | bool | None
Row = Annotated[dict[str, Value], Field(max_length=30)]


@service("data")
class Database(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.rows = VersionedTable()

    def _put(self, ctx: OpContext, table: str, row: dict[str, Any], key: str | None = None) -> str:
        row_id = self.mint("row")
        self.rows.put(row_id, {"_table": table, "_key": key, "id": row_id, **row}, ctx.now)
        return row_id

    @write(readback=lambda a: ReadBack("query", {"table": a["table"], "where": a["row"]}, a["row"]))
    def insert(self, ctx: OpContext, table: TableName, row: Row) -> Result:
        """Insert one row; the server assigns its id."""
        row_id = self._put(ctx, table, row)
        ctx.commit({"table": table, "row": row}, row_id)
        return ok(id=row_id)

    @write(batch=Batch(units="rows", unit="row"),
           readback=lambda a: ReadBack("query", {"table": a["table"], "where": {}}, {}))
    def insert_many(self, ctx: OpContext, table: TableName,
                    rows: Annotated[list[Row], Field(min_length=1, max_length=100)]) -> Result:
        """Insert several rows. Not atomic: rows commit one by one, in order, so a failure can
        leave the first rows inserted."""
        ids = list(ctx.prior_units)
        for row in rows[len(ids):]:
            ctx.commit({"table": table, "row": row}, None)
            row_id = self._put(ctx, table, row)
            ctx.effects[-1].object_id = row_id
            ids.append(row_id)
        return ok(ids=ids, inserted=len(rows))

    @write(idempotency="natural",
           readback=lambda a: ReadBack("query", {"table": a["table"], "where": a["row"]}, a["row"]))
    def upsert(self, ctx: OpContext, table: TableName, key: str, row: Row) -> Result:
        """Insert or replace the row with this key. Repeating the same upsert changes nothing."""
        existing = [(rid, r) for rid, r in self.rows.scan(View(ctx.now))
                    if r["_table"] == table and r["_key"] == key]
        if existing:
            row_id, old = existing[0]
            if {k: v for k, v in old.items() if not k.startswith("_") and k != "id"} == row:
                return ok(id=row_id, changed=False)
            self.rows.put(row_id, {"_table": table, "_key": key, "id": row_id, **row}, ctx.now)
        else:
            row_id = self._put(ctx, table, row, key)
        ctx.commit({"table": table, "key": key, "row": row}, row_id)
        return ok(id=row_id, changed=True)

    @read()
    def query(self, view: View, table: TableName, where: dict[str, Value] | None = None) -> Result:
        """Rows of a table whose fields equal every field in where (at most 200)."""
        cond = where or {}
        rows = [{k: v for k, v in r.items() if not k.startswith("_")}
                for _, r in self.rows.scan(view)
                if r["_table"] == table and all(r.get(k) == v for k, v in cond.items())]
        return ok(items=rows[:200])
