"""The contract facts a declaration implies: write class, key support and the
sentence that says it, read lag and its sentence, and the read that shows a write.

These are what a Python service's decorators state by hand; here they follow from the file, so
the text an agent reads cannot drift from what the world does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from limbo.sim.service import DAY_S, Args, ReadBack
from limbo.sim.tasks import fill
from limbo.sim.worldfile.format import HonouredWhen, LagBy, Read, ServiceDef, Write
from limbo.sim.worldfile.rules import id_field

Idempotency = Literal["keyed", "natural", "conditional", "none"]


def id_prefix(record: str) -> str:
    """The prefix of a record kind's ids when the file gives none (``order`` -> ``ord``)."""
    letters = re.sub(r"[^a-z]", "", record.lower())
    return letters[:3] or "id"


def idempotency(w: Write) -> Idempotency:
    """The write class the ledger records (a key honoured makes ``none`` into ``keyed``)."""
    if w.action in ("upsert", "delete"):
        return "natural"
    if w.action == "update":
        if w.when_args:
            return "conditional"
        changed = {**w.set, **{f: None for f in w.set_args}}
        if any(f in changed and w.set.get(f, object()) != v for f, v in w.when.items()):
            return "natural"  # the write falsifies its own precondition: a repeat is a 409
    return "none"


def key_facts(w: Write) -> tuple[Callable[[Args], bool] | bool, str, float]:
    """Native key support as the endpoint needs it, the sentence that tells the agent (empty:
    the standard one fits), and the native retention in seconds."""
    ttl = w.key_ttl_s
    kept = f"{ttl / 3600:g} h" if ttl >= 3600 else f"{ttl:g} s"
    rules = (f"a repeat with the same key and the same arguments within {kept} returns the "
             f"first result; the same key with other arguments returns 422")
    if w.key == "none":
        return False, "", ttl
    if w.key == "ignored":
        return (lambda _a: False), ("idempotency_key is accepted and ignored: every call acts "
                                    "again."), ttl
    if isinstance(w.key, HonouredWhen):
        ((arg, values),) = w.key.honoured_when.items()
        allowed = frozenset(values)
        said = " or ".join(str(v) for v in values)
        return ((lambda a: a.get(arg) in allowed),
                f"idempotency_key is honoured only when {arg} is {said} ({rules}); otherwise it "
                f"is ignored.", ttl)
    note = "" if ttl == DAY_S else f"Accepts an optional idempotency_key: {rules}."
    return True, note, ttl


def _lag_value(value: float | str) -> float | None:
    return None if value == "unavailable" else float(value)


def lag_facts(r: Read, svc: ServiceDef) -> tuple[Callable[[Args], float | None], str]:
    """The read's lag as a function of its arguments, and the sentence that says it."""
    kind = svc.writes[r.lists[0]].record if r.lists[0] in svc.writes else None
    what = f"a new {kind}" if kind else "a new effect"
    lag = r.lag_s
    if not isinstance(lag, LagBy):
        value = _lag_value(lag)
        note = ("" if value == 0 else "Not available: this read answers not_available."
                if value is None else f"Shows {what} up to {value:g} s after it commits.")
        return (lambda _a, _v=value: _v), note
    table = {k: _lag_value(v) for k, v in lag.values.items()}
    default = _lag_value(lag.default)
    by = lag.by

    def lag_of(args: Args) -> float | None:
        value = args.get(by)
        key = str(value).lower() if isinstance(value, bool) else str(value)
        return table.get(key, default)

    return lag_of, _by_note(by, table, default, what)


def _by_note(by: str, table: dict[str, float | None], default: float | None, what: str) -> str:
    groups: dict[float | None, list[str]] = {}
    for value, lag in table.items():
        groups.setdefault(lag, []).append(value)
    parts = []
    for lag, values in groups.items():
        when = f"when {by} is {' or '.join(values)}"
        parts.append(f"{when}: not available" if lag is None else
                     f"{when}: at once" if lag == 0 else f"{when}: up to {lag:g} s later")
    rest = ("not available" if default is None else "at once" if default == 0
            else f"up to {default:g} s later")
    return f"Shows {what} {'; '.join(parts)}; otherwise {rest}."


def readback_of(op: str, svc: ServiceDef) -> Callable[[Args], ReadBack | None]:
    """The read that shows write ``op``'s effect, for given arguments (``None``: none does —
    a deletion, or a write no read lists)."""
    w = svc.writes[op]
    spec = w.read_back
    name = spec.tool if spec is not None else next(
        (n for n, r in svc.reads.items() if op in r.lists), None)
    if name is None or w.action == "delete":
        return lambda _a: None
    read = svc.reads[name]
    fixed = dict(spec.args) if spec is not None else {}
    fields = list(spec.match) if spec is not None and spec.match is not None else list(w.effect)

    def readback(args: Args) -> ReadBack:
        read_args = {k: fill(v, args) for k, v in fixed.items()}
        for field in read.filter:
            if field not in read_args and args.get(field) is not None:
                read_args[field] = args[field]
        if read.search is not None and read.search.arg not in read_args:
            source = next((f for f in read.search.fields if args.get(f) is not None), None)
            read_args[read.search.arg] = str(args[source]) if source else ""
        if read.limit is not None and read.limit not in read_args:
            cap = read.args[read.limit].max if read.limit in read.args else None
            read_args[read.limit] = int(cap) if cap is not None else read.max_items
        return ReadBack(name, read_args, _match(w, args, fields, svc))

    return readback


def _match(w: Write, args: Args, fields: list[str], svc: ServiceDef) -> Args:
    """What an item must hold to show the effect: a new record's effect fields, or a changed
    record's id and the values the change wrote."""
    if w.action != "update":
        units = w.batch.units if w.batch is not None else None
        return {f: args.get(f) for f in fields if f != units}
    assert w.target is not None
    return {id_field(svc, w.record): args.get(w.target), **w.set,
            **{f: args.get(a) for f, a in w.set_args.items()}}
