"""The rules a world file must keep beyond its shape: every name it uses must exist.

Each rule reports a :class:`~limbo.sim.worldfile.source.WorldProblem` at the path it concerns (the
source turns the path into a file and line) and goes on, so one check lists every problem.
The template rules are in :mod:`limbo.sim.worldfile.template_rules`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from limbo.sim.worldfile.format import HonouredWhen, LagBy, Read, ServiceDef, WorldFile, Write
from limbo.sim.worldfile.values import Fits

Report = Callable[[Sequence[str | int], str], None]
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
KEY_FIELD = "idempotency_key"
RESERVED = frozenset({"ok", "error", "idempotent_replayed", "changed", "deleted", "items"})
"""Result fields LIMBO writes itself: an argument of that name would be overwritten."""


@dataclass(frozen=True)
class ToolFacts:
    """What a template rule needs to know of a tool, a world's or a registered one."""

    kind: str
    args: frozenset[str]
    required: frozenset[str]
    effect: frozenset[str] | None
    """The fields its effects commit with (``None``: not known, any argument)."""
    batch: bool
    returns: frozenset[str] | None = None
    """The top-level fields of its success result (``None``: not known)."""
    tables: frozenset[str] = frozenset()
    """The fields of its result that hold a table (a ``save`` may go one field into them)."""
    fits: Fits | None = None
    """Its arguments' types, to check the values a template gives them (``None``: not known)."""


def placeholders(value: Any) -> list[str]:
    """Every ``{name}`` in a string, list or table (keys are not filled, so not read)."""
    if isinstance(value, str):
        return _PLACEHOLDER.findall(value)
    if isinstance(value, list):
        return [n for v in value for n in placeholders(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in placeholders(v)]
    return []


def hint(name: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` when a choice is close to ``name``."""
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def world_tools(world: WorldFile) -> dict[str, ToolFacts]:
    """Every tool a world declares, by tool name."""
    out: dict[str, ToolFacts] = {}
    for name, svc in world.services.items():
        for op, w in svc.writes.items():
            tool = f"{name}_{op}"
            returns = None if svc.proxy else frozenset(_returns(svc, w))
            out[tool] = ToolFacts("write", frozenset(w.args), _required(w), frozenset(w.effect),
                                  w.batch is not None, returns, _tables(svc, w),
                                  Fits.of_args(tool, w.args))
        for op, r in svc.reads.items():
            tool = f"{name}_{op}"
            out[tool] = ToolFacts("read", frozenset(r.args), _required(r), None, False,
                                  None if svc.proxy else frozenset({"items"}),
                                  fits=Fits.of_args(tool, r.args))
    return out


def id_field(svc: ServiceDef, record: str | None) -> str:
    """The field holding a record kind's ids: as its creating write says, else
    ``<record>_id``."""
    return next((w.id_field for w in svc.writes.values() if w.record == record and w.id_field
                 and w.action in ("create", "upsert")), f"{record}_id")


def _returns(svc: ServiceDef, w: Write) -> set[str]:
    """The fields of a played write's success result (see :mod:`limbo.sim.worldfile.play`)."""
    ident = id_field(svc, w.record)
    if w.batch is not None:
        return {f"{ident}s", "count"}
    if w.action == "delete":
        return {"deleted"}
    made = {f for x in svc.writes.values() if x.record == w.record
            and x.action in ("create", "upsert") for f in (*x.args, *x.set)}
    return {ident, *made, *w.set, *w.set_args} | ({"changed"} if w.action == "upsert" else set())


def _tables(svc: ServiceDef, w: Write) -> frozenset[str]:
    """The fields of a played write's result that hold a table: the record's ``object``
    arguments (a batch answers ids and a count; a proxied write's answer is not known)."""
    if svc.proxy or w.batch is not None or w.action == "delete":
        return frozenset()
    return frozenset(f for x in svc.writes.values() if x.record == w.record
                     and x.action in ("create", "upsert") for f, a in x.args.items()
                     if a.type == "object")


def _required(tool: Write | Read) -> frozenset[str]:
    return frozenset(n for n, a in tool.args.items() if not a.optional)


def check_services(world: WorldFile, taken: set[str], report: Report) -> None:
    """The rules of every service: names free, writes and reads consistent."""
    for name, svc in world.services.items():
        at = ("services", name)
        if name in taken:
            report(at, f"service {name!r} is already a LIMBO service (built-in or a plugin's); "
                       f"give yours another name")
        if not svc.writes and not svc.reads:
            report(at, f"service {name!r} declares no tool ([services.{name}.writes.<op>] or "
                       f"[services.{name}.reads.<op>])")
        for op in set(svc.writes) & set(svc.reads):
            report((*at, "reads", op), f"{op!r} is declared both as a write and as a read")
        for op, w in svc.writes.items():
            _check_write(svc, name, op, w, report)
        for op, r in svc.reads.items():
            _check_read(svc, name, op, r, report)


def _args_exist(args: Iterable[str], have: Iterable[str], at: Sequence[str | int], what: str,
                tool: str, report: Report) -> None:
    known = set(have)
    for arg in args:
        if arg not in known:
            report(at, f"{what} names {arg!r}, which is not an argument of {tool}"
                       f"{hint(arg, known)}")


def _check_write(svc: ServiceDef, service: str, op: str, w: Write, report: Report) -> None:
    at, tool = ("services", service, "writes", op), f"{service}_{op}"
    if KEY_FIELD in w.args:
        report((*at, "args", KEY_FIELD), f"{KEY_FIELD} is not declared as an argument: LIMBO "
                                         f"adds it where the contract offers a key (key = ...)")
    _args_exist(w.effect, w.args, (*at, "effect"), "effect", tool, report)
    for name in sorted(set(w.args) & RESERVED):
        report((*at, "args", name), f"{name!r} is a field of every result; name the argument "
                                    f"otherwise")
    if isinstance(w.key, HonouredWhen):
        _check_honoured(w, (*at, "key"), tool, report)
    if w.batch is not None:
        _check_batch(w, at, tool, report)
    if w.read_back is not None:
        _check_read_back(svc, op, w, at, tool, report)
    if w.result is not None:
        _args_exist(sorted(_placeholders(w.result) - {"id"}), w.args, (*at, "result"),
                    "result", tool, report)
    if not svc.proxy:
        _check_play(svc, w, at, tool, report)


def _check_honoured(w: Write, at: Sequence[str | int], tool: str, report: Report) -> None:
    assert isinstance(w.key, HonouredWhen)
    for arg, values in w.key.honoured_when.items():
        if arg not in w.args:
            report(at, f"key is honoured_when {arg!r}, which is not an argument of {tool}")
            continue
        enum: list[Any] = list(w.args[arg].enum or ())
        for value in values if enum else ():
            if value not in enum:
                report(at, f"key is honoured_when {arg} = {value!r}, which is not one of its "
                           f"values ({', '.join(map(str, enum))})")


def _check_batch(w: Write, at: Sequence[str | int], tool: str, report: Report) -> None:
    assert w.batch is not None
    units = w.args.get(w.batch.units)
    where = (*at, "batch")
    if units is None or units.type != "list" or units.items != "object":
        report(where, f"batch units {w.batch.units!r} must be a list argument of {tool} holding "
                      f"objects (type = \"list\", items = \"object\")")
    if w.batch.unit in w.args:
        report(where, f"batch unit {w.batch.unit!r} is also an argument of {tool}; name the "
                      f"unit otherwise")
    if w.batch.units not in w.effect:
        report((*at, "effect"), f"the effect of batch write {tool} must include its units "
                                f"argument {w.batch.units!r} (each unit commits as one effect)")
    if w.action != "create":
        report(where, f"a batch write creates records (action = \"create\"), not {w.action}")


def _check_read_back(svc: ServiceDef, op: str, w: Write, at: Sequence[str | int], tool: str,
                     report: Report) -> None:
    assert w.read_back is not None
    rb, where = w.read_back, (*at, "read_back")
    read = svc.reads.get(rb.tool)
    if read is None:
        report(where, f"read_back names {rb.tool!r}, which is not a read of this service"
                      f"{hint(rb.tool, svc.reads)}")
        return
    if op not in read.lists:
        report(where, f"read_back names {rb.tool!r}, which does not list {op!r} (lists = "
                      f"{read.lists})")
    _args_exist(rb.args, read.args, where, "read_back.args", rb.tool, report)
    for name in placeholders(rb.args):
        if name not in w.args:
            report(where, f"read_back.args uses {{{name}}}, which is not an argument of {tool}")
    for field in rb.match or ():
        if field not in w.effect:
            report(where, f"read_back.match names {field!r}, which is not an effect field of "
                          f"{tool} ({', '.join(w.effect)})")


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _placeholders(value: Any) -> set[str]:
    """The ``{name}`` placeholders anywhere in a result shape."""
    if isinstance(value, str):
        return set(_PLACEHOLDER.findall(value))
    if isinstance(value, dict):
        return set().union(*map(_placeholders, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_placeholders, value)) if value else set()
    return set()


def _check_play(svc: ServiceDef, w: Write, at: Sequence[str | int], tool: str,
                report: Report) -> None:
    """What a simulated write needs to be played."""
    if w.record is None:
        report(at, f"{tool} needs record = \"<kind>\": the kind of record it "
                   f"{'creates' if w.action in ('create', 'upsert') else 'changes'} (or mark "
                   f"the service proxy = true)")
    changes = w.action in ("update", "delete")
    if changes and w.target is None:
        report(at, f"{tool} ({w.action}) needs target = \"<argument>\": the argument holding "
                   f"the id of the record it {w.action}s")
    if w.action == "upsert" and w.upsert_key is None:
        report(at, f"{tool} (upsert) needs upsert_key = \"<argument>\"")
    misplaced = {"target": w.target, "find": w.find, "when": w.when, "when_args": w.when_args,
                 "set_args": w.set_args, "reverses": w.reverses} if not changes else {}
    if w.action == "delete":
        misplaced = {"set": w.set, "set_args": w.set_args}
    if w.action != "upsert" and w.upsert_key is not None:
        misplaced["upsert_key"] = w.upsert_key
    for name, value in misplaced.items():
        if value:
            report((*at, name), f"{name} does not apply to a {w.action} write")
    named = [*([w.target] if w.target else []), *w.find, *w.when_args.values(),
             *w.set_args.values(), *([w.upsert_key] if w.upsert_key else [])]
    _args_exist(named, w.args, at, "the write", tool, report)
    if w.action in ("create", "upsert"):
        ident = id_field(svc, w.record)
        for name in [ident] if ident in w.args else []:
            report((*at, "args", name), f"{name!r} is the id {tool} assigns (id_field); it "
                                        f"cannot also be an argument")
        for name in sorted(set(w.set) & set(w.args)):
            report((*at, "set"), f"set writes {name!r}, which is also an argument of {tool}")
    if changes and w.record is not None and w.record not in _created(svc):
        report((*at, "record"), f"{tool} changes {w.record!r} records, which no create or "
                                f"upsert write of this service makes")


def _created(svc: ServiceDef) -> set[str]:
    return {w.record for w in svc.writes.values()
            if w.action in ("create", "upsert") and w.record is not None}


def _check_read(svc: ServiceDef, service: str, op: str, r: Read, report: Report) -> None:
    at, tool = ("services", service, "reads", op), f"{service}_{op}"
    for listed in r.lists:
        if listed not in svc.writes:
            report((*at, "lists"), f"{tool} lists {listed!r}, which is not a write of "
                                   f"{service}{hint(listed, svc.writes)}")
    if isinstance(r.lag_s, LagBy):
        _check_lag(r, r.lag_s, (*at, "lag_s"), tool, report)
    if svc.proxy:
        return
    named = [*r.filter, *([r.limit] if r.limit else []), *([r.search.arg] if r.search else [])]
    _args_exist(named, r.args, at, "the read", tool, report)
    if r.limit is not None and r.limit in r.args and r.args[r.limit].type != "integer":
        report((*at, "limit"), f"limit {r.limit!r} must be an integer argument")
    kinds = {svc.writes[w].record for w in r.lists if w in svc.writes}
    if len(kinds) > 1:
        report((*at, "lists"), f"{tool} lists writes of several record kinds "
                               f"({', '.join(sorted(map(str, kinds)))}); a read shows one kind")


def _check_lag(r: Read, lag: LagBy, at: Sequence[str | int], tool: str, report: Report) -> None:
    arg = r.args.get(lag.by)
    if arg is None:
        report(at, f"lag_s is by {lag.by!r}, which is not an argument of {tool}"
                   f"{hint(lag.by, r.args)}")
        return
    if arg.enum is not None:
        known = {str(v) for v in arg.enum}
        for value in lag.values:
            if value not in known:
                report(at, f"lag_s names {lag.by} = {value!r}, which is not one of its values "
                           f"({', '.join(sorted(known))})")
