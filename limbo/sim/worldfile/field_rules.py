"""The rules of the values and fields a service declares, beyond the names
(:mod:`limbo.sim.worldfile.rules`): every argument can be built and its own ``default`` and
``enum`` values fit it; a key's honoured values and a lag's ``by`` values are values the
argument can take; a read-back's fixed arguments are values its read accepts; the record
fields a read filters and searches on, and a change requires, are fields its records have;
and the writes of one record kind agree on its id field and id prefix.

Each of these a run would otherwise meet as an error (a tool that cannot be built, an
``invalid_argument`` on the plan's own call) or, worse, as a quiet mis-run (a key never
honoured, a read-back that never finds its record, so the verifying policies repeat the write).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from limbo.sim.worldfile.format import Arg, HonouredWhen, LagBy, Read, ServiceDef, Write
from limbo.sim.worldfile.rules import Report, hint, placeholders
from limbo.sim.worldfile.values import Fits, arg_misfits, unusable_name

Path = Sequence[str | int]
LAG_BY_TYPES = ("string", "integer", "boolean")
"""The argument types a lag may depend on: their values are written as the table's keys."""


def check_fields(svc: ServiceDef, service: str, report: Report) -> None:
    """Every rule of this module for one service."""
    at = ("services", service)
    for kind, tools in (("writes", svc.writes), ("reads", svc.reads)):
        for op, tool in tools.items():
            check_args(tool.args, (*at, kind, op, "args"), report)
    for op, w in svc.writes.items():
        if isinstance(w.key, HonouredWhen):
            _honoured_values(w, w.key, (*at, "writes", op, "key"), f"{service}_{op}", report)
        if w.read_back is not None and w.read_back.tool in svc.reads:
            _read_back_values(w, svc.reads[w.read_back.tool], (*at, "writes", op, "read_back"),
                              report)
    for op, r in svc.reads.items():
        if isinstance(r.lag_s, LagBy) and r.lag_s.by in r.args:
            _lag_values(r.lag_s, r.args[r.lag_s.by], (*at, "reads", op, "lag_s"), report)
    if not svc.proxy:
        _record_kinds(svc, at, report)
        _record_fields(svc, at, report)


def check_args(args: Mapping[str, Arg], at: Path, report: Report) -> None:
    """Names a tool can be built with, and each argument's own values fit it."""
    for name, arg in args.items():
        why = unusable_name(name)
        if why is not None:
            report((*at, name), f"{why}; name the argument otherwise")
            continue
        for field, what in arg_misfits(arg):
            report((*at, name, field), what)


def _honoured_values(w: Write, key: HonouredWhen, at: Path, tool: str, report: Report) -> None:
    ((arg, values),) = key.honoured_when.items()
    if arg not in w.args or w.args[arg].enum is not None:
        return  # named by rules: an unknown argument, or a value not in its enum
    fits = Fits.of_args(tool, {arg: w.args[arg]})
    for value in values:
        why = fits.misfit(arg, value)
        if why is not None:
            report(at, f"key is honoured_when {arg} = {value!r}, which {arg} cannot be ({why}): "
                       f"the key would never be honoured; write values of its type")


def _read_back_values(w: Write, read: Read, at: Path, report: Report) -> None:
    assert w.read_back is not None
    fits = Fits.of_args(w.read_back.tool, read.args)
    for name, value in w.read_back.args.items():
        why = None if placeholders(value) else fits.misfit(name, value)
        if why is not None:
            report(at, f"read_back.args.{name} = {value!r} is no value of {w.read_back.tool}'s "
                       f"argument {name} ({why}): every read-back would be refused")


def _lag_values(lag: LagBy, arg: Arg, at: Path, report: Report) -> None:
    if arg.type not in LAG_BY_TYPES:
        report(at, f"lag_s is by {lag.by!r}, a {arg.type} argument: a lag can depend on a "
                   f"{', '.join(LAG_BY_TYPES[:-1])} or {LAG_BY_TYPES[-1]} argument only")
        return
    for key in lag.values:
        if arg.type == "boolean" and key not in ("true", "false"):
            report(at, f"lag_s names {lag.by} = {key!r}, but {lag.by} is true or false: write "
                       f"the keys \"true\" and \"false\"")
        elif arg.type == "integer" and key != str(_integer(key)):
            report(at, f"lag_s names {lag.by} = {key!r}, but {lag.by} is an integer: write "
                       f"each key as its digits (\"1\", \"-2\")")


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _record_kinds(svc: ServiceDef, at: Path, report: Report) -> None:
    """The writes that make one record kind agree on its id field and prefix (the first one's
    would be used, the others' silently ignored)."""
    said: dict[tuple[str, str], tuple[str, str]] = {}
    for op, w in svc.writes.items():
        if w.record is None or w.action not in ("create", "upsert"):
            continue
        for field in ("id_field", "id_prefix"):
            value = getattr(w, field)
            first = said.setdefault((w.record, field), (op, value)) if value else None
            if first is not None and first[1] != value:
                report((*at, "writes", op, field),
                       f"{field} = {value!r}, but {first[0]} makes {w.record!r} records with "
                       f"{field} = {first[1]!r}: a record kind has one; write the same")


def record_fields(svc: ServiceDef, kind: str | None) -> set[str] | None:
    """The fields records of ``kind`` can have (``None``: not known — a batch makes them, and
    its units' fields are the agent's)."""
    makers = [w for w in svc.writes.values() if w.record == kind]
    if kind is None or any(w.batch is not None for w in makers):
        return None
    fields = {f for w in makers if w.action in ("create", "upsert") for f in (*w.args, *w.set)}
    fields |= {f for w in makers if w.action == "update" for f in (*w.set, *w.set_args)}
    ident = next((w.id_field for w in makers if w.id_field and w.action in ("create", "upsert")),
                 f"{kind}_id")
    return fields | {ident}


def _record_fields(svc: ServiceDef, at: Path, report: Report) -> None:
    """What a read filters and searches on, and what a change requires of its record, are
    fields the record has: else the read never shows it and the change always refuses."""
    for op, r in svc.reads.items():
        kinds = {svc.writes[w].record for w in r.lists if w in svc.writes}
        fields = record_fields(svc, next(iter(kinds))) if len(kinds) == 1 else None
        named = [("filter", f) for f in r.filter if f in r.args]
        named += [("search", f) for f in (r.search.fields if r.search else ())]
        _fields_exist(named, fields, (*at, "reads", op), f"{op} shows", report)
    for op, w in svc.writes.items():
        if w.action not in ("update", "delete"):
            continue
        named = [("when", f) for f in w.when] + [("when_args", f) for f in w.when_args]
        named += [("find", f) for f in w.find if f in w.args]
        _fields_exist(named, record_fields(svc, w.record), (*at, "writes", op),
                      f"{op} changes", report)


def _fields_exist(named: list[tuple[str, str]], fields: set[str] | None, at: Path, what: str,
                  report: Report) -> None:
    if fields is None:
        return
    for key, field in named:
        if field not in fields:
            report((*at, key), f"{key} names {field!r}, a field the records {what} do not "
                               f"have (theirs: {', '.join(sorted(fields))}){hint(field, fields)}")
