"""From a checked world file to service classes: the same :class:`~limbo.sim.service.OpSpec`
contract facts a Python service's decorators record, so the tool schemas and descriptions, the
boundary, the endpoint's key rules, the read-backs, every fault and the grading treat a
declared service exactly as a built-in one.

Each operation is a function whose signature is made from the declared arguments (the tool
layer builds the strict argument model from it, as from a Python method's signature).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from limbo.sim.service import DAY_S, Args, Batch, OpSpec, Service
from limbo.sim.worldfile.derive import (
    id_prefix,
    idempotency,
    key_facts,
    lag_facts,
    readback_of,
)
from limbo.sim.worldfile.format import Arg, ServiceDef, WorldFile
from limbo.sim.worldfile.latency import latency_of
from limbo.sim.worldfile.play import PlayedService
from limbo.sim.worldfile.rules import id_field
from limbo.sim.worldfile.values import annotation


@dataclass(frozen=True)
class EffectBatch(Batch):
    """A declared batch write: each unit commits with the call's *effect* fields (not every
    other argument), so the intents of a template's batch step are in the ledger's shape."""

    fields: tuple[str, ...] = ()

    def basis(self, args: Args) -> Args:
        return {k: v for k, v in args.items() if k != self.units and k in self.fields}


def build_services(world: WorldFile, identity: str) -> dict[str, type[Service]]:
    """One class per service of ``world`` (which must have no proxy service)."""
    return {name: _service(name, svc, identity) for name, svc in sorted(world.services.items())}


def _service(name: str, svc: ServiceDef, identity: str) -> type[Service]:
    id_fields: dict[str, str] = {}
    prefixes: dict[str, str] = {}
    for w in svc.writes.values():
        if w.record is not None and w.action in ("create", "upsert"):
            id_fields.setdefault(w.record, id_field(svc, w.record))
            prefixes.setdefault(w.record, w.id_prefix or id_prefix(w.record))
    cls: type[PlayedService] = type(f"Played_{name}", (PlayedService,), {
        "__doc__": svc.description or f"The {name} service of world {identity}.",
        "decl": svc, "world": identity, "id_fields": id_fields, "prefixes": prefixes})
    cls.name = name
    cls.ops = {}
    for op in svc.writes:
        cls.ops[op] = _write_op(cls, op, svc)
    for op, r in svc.reads.items():
        lag, note = lag_facts(r, svc)
        cls.ops[op] = OpSpec(service=name, name=op, kind="read", func=_function(op, r.args, True),
                             doc=r.description, owner=cls, lag=lag, lag_note=note)
    return cls


def _write_op(cls: type[PlayedService], op: str, svc: ServiceDef) -> OpSpec:
    w = svc.writes[op]
    native_key, key_note, ttl = key_facts(w)
    batch = (EffectBatch(w.batch.units, w.batch.unit, tuple(w.effect))
             if w.batch is not None else None)
    return OpSpec(
        service=cls.name, name=op, kind="write", func=_function(op, w.args, False),
        doc=w.description, owner=cls, idempotency=idempotency(w), native_key=native_key,
        key_note=key_note, key_ttl_native=_constant(ttl) if ttl != DAY_S else None,
        reversibility="reversible" if w.reversible else "irreversible",
        readback=readback_of(op, svc), batch=batch, key_scope=w.key_scope,
        latency=latency_of(w.latency_s))


def _constant(seconds: float) -> Callable[[Args], float]:
    return lambda _args: seconds


def _function(op: str, args: dict[str, Arg], read: bool) -> Any:
    """The operation as a method whose signature is the declared arguments (required ones
    first, as Python needs), dispatching to the played service."""

    def method(self: PlayedService, ctx: Any, **kwargs: Any) -> Any:
        return self.read(op, ctx, kwargs) if read else self.write(op, ctx, kwargs)

    ordered = sorted(args.items(), key=lambda item: item[1].optional)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for name, arg in ordered:
        hints[name] = annotation(arg)
        default = (arg.default if arg.default is not None else
                   (None if not arg.required else inspect.Parameter.empty))
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=hints[name]))
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__annotations__ = hints
    method.__name__ = method.__qualname__ = op
    return method
