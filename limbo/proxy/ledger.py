"""The proxy's ledger: every forwarded write, what the upstream answered, and the effects that
follow — in the sandbox ledger's shape, so :func:`limbo.log.grading.grade` grades it unchanged.

A write is in one of four states. ``committed``: the upstream answered with success (its effect
is the write's effect fields, or one effect per unit of a batch). ``replayed``: a success that
is the answer to an earlier write — the upstream said so (``idempotent_replayed``), or it
returned the id an earlier write of the same tool created — no new effect. ``uncertain``: the
upstream answered with an error, or not at all, or the proxy died before hearing;
reconciliation (:mod:`limbo.proxy.reconcile`) decides, from the upstream's state, whether it
took effect: ``recovered`` or ``absent`` (or ``unverifiable`` when nothing can decide).

The world file's declarations never decide alone. A write that repeats the key of an earlier
committed write where the world says keys are honoured is a replay only if the upstream's
answer says so (the flag, the earlier id): answered with a new id, it is a new effect, and the
key is *misdeclared* — the record says so, and the grade counts what happened; answered with no
id at all, it is left to reconciliation, which counts the items its arguments show.

The same :meth:`Ledger.apply` reads a journal entry live and when a journal is read back, so a
record built after a crash is built by the code every normal episode uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from limbo.base.hashing import plain_json
from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.proxy.shapes import object_id
from limbo.sim.readback import resolve
from limbo.sim.service import Args, Contract

COMMITTED, REPLAYED, UNCERTAIN = "committed", "replayed", "uncertain"
RECOVERED, ABSENT, UNVERIFIABLE = "recovered", "absent", "unverifiable"
REPLAY_FLAG = "idempotent_replayed"
HONOURED = 'key = "honoured"'
"""The declaration a misdeclared key contradicts."""


@dataclass
class LedgerWrite:
    """One forwarded write."""

    n: int
    t: float
    tool: str
    args: Args
    key: str | None
    attempt: str
    request_id: str
    state: str = UNCERTAIN
    acked_at: float | None = None
    object_ids: list[str | None] = field(default_factory=list)
    """The ids of the effects it committed (one per batch unit)."""
    units: list[int] | None = None
    """A batch reconciled unit by unit: the indexes of the units that took effect (``None``:
    all of them)."""
    why: str | None = None
    """Why it is uncertain (the upstream's error, the lost call) or what reconciliation saw."""
    misdeclared: str | None = None
    """The declaration its outcome contradicts (a key declared honoured that was not)."""

    @property
    def in_ledger(self) -> bool:
        return self.state in (COMMITTED, RECOVERED)


class Ledger:
    """The writes of one episode, in the order they were forwarded."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.writes: dict[int, LedgerWrite] = {}
        self._held: dict[str, tuple[set[str], set[str]]] = {}
        """Tool -> (object ids, keys) of its writes in the ledger: what a replay answers with."""

    # -- building -----------------------------------------------------------------------------

    def apply(self, entry: dict[str, Any]) -> None:
        """Take one journal entry (``intent``, ``ack``, ``lost``, ``reconciled``); others are
        not the ledger's."""
        kind = entry["type"]
        if kind == "intent":
            self.writes[entry["n"]] = LedgerWrite(entry["n"], entry["t"], entry["tool"], entry["args"],
                                            entry.get("key"), entry["attempt"],
                                            entry["request_id"])
        elif kind in ("ack", "lost", "reconciled"):
            write = self.writes[entry["n"]]
            write.state, write.why = entry["state"], entry.get("why")
            write.acked_at = entry["t"] if kind == "ack" else write.acked_at
            write.object_ids = list(entry.get("object_ids") or [])
            write.units = entry.get("units")
            write.misdeclared = entry.get("misdeclared") or write.misdeclared
            if write.in_ledger:
                ids, keys = self._held.setdefault(write.tool, (set(), set()))
                ids.update(i for i in write.object_ids if i is not None)
                keys.update([write.key] if write.key is not None else [])

    def ack_entry(self, n: int, t: float, answer: dict[str, Any]) -> dict[str, Any]:
        """The ``ack`` journal entry for write ``n`` answered with ``answer`` (a payload)."""
        write = self.writes[n]
        tool = self.catalog.tools[write.tool]
        entry: dict[str, Any] = {"type": "ack", "n": n, "t": t, "object_ids": [], "why": None}
        if not answer.get("ok"):
            return {**entry, "state": UNCERTAIN, "why": _short(answer)}
        if self._replay(write, tool, answer):
            return {**entry, "state": REPLAYED}
        ids = self._ids(tool, write.args, answer)
        if not self.misdeclared(write):
            return {**entry, "state": COMMITTED, "object_ids": ids}
        if any(i is not None for i in ids) and tool.write is not None and \
                tool.write.target is None:  # a new id: the key was not honoured
            return {**entry, "state": COMMITTED, "object_ids": ids,
                    **self.misdeclared(write)}
        return {**entry, "state": UNCERTAIN,
                "why": f"a success repeating key {write.key!r}, which the world says is "
                       f"honoured, with no id of its own to tell a replay from a new effect"}

    def _replay(self, write: LedgerWrite, tool: DeclaredTool, answer: dict[str, Any]) -> bool:
        """The upstream's answer says this success is an earlier write's: its flag, or the id
        an earlier write of the tool created."""
        if answer.get(REPLAY_FLAG) is True:
            return True
        ids, _ = self._held.get(write.tool, (set(), set()))
        w = tool.write
        assert w is not None
        return w.action in ("create", "upsert") and object_id(answer, w.id_field) in ids

    def misdeclared(self, write: LedgerWrite) -> dict[str, str]:
        """``{"misdeclared": ...}`` when ``write`` repeats the key of a committed write where
        the world says keys are honoured, so a new effect of it contradicts the world file."""
        _, keys = self._held.get(write.tool, (set(), set()))
        tool = self.catalog.tools[write.tool]
        repeat = write.key in keys and tool.op.honours_key(Contract.NATIVE, write.args)
        return {"misdeclared": HONOURED} if repeat else {}

    def _ids(self, tool: DeclaredTool, args: Args, answer: dict[str, Any]) -> list[str | None]:
        w = tool.write
        assert w is not None
        if tool.op.batch is not None:
            listed = answer.get(f"{w.id_field}s") if w.id_field else None
            units = len(tool.op.batch.items(args))
            if isinstance(listed, list) and len(listed) == units:
                return [str(i) for i in listed]
            return [None] * units
        if w.action in ("update", "delete") and w.target is not None:
            return [str(args.get(w.target))]
        return [object_id(answer, w.id_field)]

    # -- reading ------------------------------------------------------------------------------

    def uncertain(self) -> list[LedgerWrite]:
        return [w for w in self.writes.values() if w.state == UNCERTAIN]

    def claimed(self, tool: str) -> set[str]:
        """Ids that effects of ``tool`` in the ledger hold (a reconciled item must be another)."""
        return set(self._held.get(tool, (set(), set()))[0])

    def entries(self) -> list[dict[str, Any]]:
        """The committed effects, in the sandbox ledger's shape, in order of their time."""
        out: list[dict[str, Any]] = []
        for write in sorted((w for w in self.writes.values() if w.in_ledger),
                            key=lambda w: (w.acked_at if w.acked_at is not None else w.t, w.n)):
            out += self._effects(write, len(out))
        return out

    def _effects(self, write: LedgerWrite, seq: int) -> list[dict[str, Any]]:
        tool = self.catalog.tools[write.tool]
        w = tool.write
        assert w is not None
        plan = resolve(tool.op, write.args)
        wclass = tool.op.write_class(Contract.NATIVE, write.args,
                                     plan.lag if plan is not None else None)
        shapes = (tool.op.batch.effects(write.args) if tool.op.batch is not None
                  else [{f: write.args.get(f) for f in w.effect}])
        ids = write.object_ids + [None] * (len(shapes) - len(write.object_ids))
        target = write.args.get(w.target) if w.reverses and w.target else None
        t = write.acked_at if write.acked_at is not None else write.t
        kept = write.units if write.units is not None else range(len(shapes))
        return [{"seq": seq + j, "t": t, "service": tool.op.service, "op": tool.op.name,
                 "tool": tool.name, "args": shapes[i], "object_id": ids[i],
                 "request_id": write.request_id, "attempt": write.attempt, "key": write.key,
                 "write_class": wclass, "reverses": str(target) if target is not None else None}
                for j, i in enumerate(kept)]

    def duplicates(self) -> dict[str, int]:
        """Business keys (tool and effect fields) committed more than once -> how many extra
        effects: what a duplicate is, whether or not a task declares the effect."""
        counts: dict[str, int] = {}
        for entry in self.entries():
            if entry["reverses"] is None:
                key = f"{entry['tool']} {_plain(entry['args'])}"
                counts[key] = counts.get(key, 0) + 1
        return {k: n - 1 for k, n in counts.items() if n > 1}

    def contradicted(self) -> list[dict[str, Any]]:
        """The writes whose outcome contradicts the world file's declarations."""
        return [{"tool": w.tool, "declared": w.misdeclared, "request_id": w.request_id,
                 "key": w.key, "state": w.state, "object_ids": w.object_ids}
                for w in self.writes.values() if w.misdeclared]

    def counts(self) -> dict[str, int]:
        """Writes per state."""
        out: dict[str, int] = {}
        for w in self.writes.values():
            out[w.state] = out.get(w.state, 0) + 1
        return out


def _plain(args: Args) -> str:
    return plain_json(args)


def _short(answer: dict[str, Any]) -> str:
    return plain_json({k: v for k, v in answer.items() if k != "ok"})[:300]
