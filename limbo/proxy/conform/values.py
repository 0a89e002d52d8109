"""Arguments for the calls ``limbo conform`` makes: made from each tool's declared arguments.

A check needs a call the server accepts, and for property 2 a second call that differs in one
business argument. The world file's argument specs are used where the tool is declared there
(its ``effect`` fields say which arguments make the business effect, so the one varied is one
of them); else the tool's JSON Schema (``inputSchema``), varying its first required argument.
Only required arguments are sent (plus the idempotency key): an optional one left out is the
server's own default, the call a client most often makes.

Every value carries the check's *tag* (the run's nonce and the check), so two checks — and two
runs against the same database — never make the same business effect by accident. A value the
schema cannot give (a ``oneOf`` of objects, a ``null`` type) makes the tool untestable, said
once, rather than a guess the server would refuse.
"""

from __future__ import annotations

from typing import Any

from limbo.sim.worldfile.format import Arg

Schema = dict[str, Any]


class Unmakeable(Exception):
    """No value can be made for an argument from what its schema says."""


def arg_schema(arg: Arg) -> Schema:
    """A world file's argument spec as the JSON Schema a tool would list for it."""
    out: Schema = {"type": "array" if arg.type == "list" else arg.type}
    if arg.enum is not None:
        out["enum"] = list(arg.enum)
    if arg.min is not None:
        out["minimum"] = arg.min
    if arg.max is not None:
        out["maximum"] = arg.max
    sized = ("minItems", "maxItems") if arg.type == "list" else ("minLength", "maxLength")
    for name, value in zip(sized, (arg.min_length, arg.max_length), strict=True):
        if value is not None:
            out[name] = value
    if arg.items is not None:
        out["items"] = {"type": arg.items}
    return out


def world_schema(args: dict[str, Arg]) -> Schema:
    """A world file write's arguments as one object schema (required: no default, required)."""
    return {"type": "object", "properties": {n: arg_schema(a) for n, a in args.items()},
            "required": [n for n, a in args.items() if a.required and a.default is None]}


def make(schema: Schema, tag: str, skip: str) -> dict[str, Any]:
    """The required arguments of an object ``schema`` (all but ``skip``, the key), for ``tag``."""
    props = _props(schema)
    required = [n for n in schema.get("required") or () if isinstance(n, str) and n != skip]
    return {name: value(name, props.get(name) or {}, tag) for name in required}


def vary(schema: Schema, args: dict[str, Any], tag: str, prefer: list[str]) -> dict[str, Any] | None:
    """``args`` with one business argument changed (the first of ``prefer`` that can change,
    else the first of ``args``); ``None`` when none can."""
    props = _props(schema)
    for name in [*[p for p in prefer if p in args], *args]:
        try:
            other = value(name, props.get(name) or {}, tag, alt=True)
        except Unmakeable:
            continue
        if other != args[name]:
            return {**args, name: other}
    return None


def _props(schema: Schema) -> dict[str, Any]:
    found = schema.get("properties")
    return found if isinstance(found, dict) else {}


def value(name: str, spec: Schema, tag: str, alt: bool = False) -> Any:
    """A value of ``spec`` for argument ``name`` (``alt``: a second, different one)."""
    spec = _concrete(spec)
    if "const" in spec:
        return spec["const"]
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return enum[1 if alt and len(enum) > 1 else 0]
    kind = spec.get("type", "string")
    maker = _MAKERS.get(kind) if isinstance(kind, str) else None
    if maker is None:
        raise Unmakeable(f"argument {name}: no value can be made for type {kind!r}")
    return maker(name, spec, tag, alt)


def _concrete(spec: Schema) -> Schema:
    """The first alternative of an ``anyOf``/``oneOf`` that is not ``null`` (an optional
    argument's schema, as pydantic writes it), and the first non-null of a list of types."""
    for combo in ("anyOf", "oneOf"):
        options = spec.get(combo)
        if isinstance(options, list):
            kept = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            if kept:
                return {**{k: v for k, v in spec.items() if k != combo}, **kept[0]}
    kind = spec.get("type")
    if isinstance(kind, list):
        kept = [k for k in kind if k != "null"]
        return {**spec, "type": kept[0] if kept else "null"}
    return spec


def _string(name: str, spec: Schema, tag: str, alt: bool) -> str:
    text = f"{tag}-{name}" + ("-b" if alt else "")
    if spec.get("format") == "email":
        text = f"{tag}-{name}{'-b' if alt else ''}@example.com"
    low, high = spec.get("minLength"), spec.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text += "x" * (low - len(text))
    if isinstance(high, int) and len(text) > high:
        text = (text[-high:] if alt else text[:high]) if high > 0 else ""
    return text


def _number(name: str, spec: Schema, tag: str, alt: bool) -> int | float:
    low = spec.get("minimum")
    if not isinstance(low, (int, float)):
        low = spec["exclusiveMinimum"] + 1 if isinstance(spec.get("exclusiveMinimum"),
                                                         (int, float)) else 1
    high = spec.get("maximum")
    found = low + (1 if alt else 0)
    if isinstance(high, (int, float)) and found > high:
        found = high
    return int(found) if spec.get("type") == "integer" else float(found)


def _boolean(name: str, spec: Schema, tag: str, alt: bool) -> bool:
    return alt


def _array(name: str, spec: Schema, tag: str, alt: bool) -> list[Any]:
    found = spec.get("items")
    items: Schema = found if isinstance(found, dict) else {"type": "string"}
    count = max(1, spec.get("minItems") or 1)
    return [value(name, items, f"{tag}{i}", alt) for i in range(count)]


def _object(name: str, spec: Schema, tag: str, alt: bool) -> dict[str, Any]:
    made = make(spec, tag, skip="")
    if alt:
        other = vary(spec, made, tag, [])
        return other if other is not None else made
    return made


_MAKERS = {"string": _string, "integer": _number, "number": _number, "boolean": _boolean,
           "array": _array, "object": _object}
