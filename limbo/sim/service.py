"""What every simulated service is made of.

A service is a class whose methods, decorated :func:`read` or :func:`write`, are its
operations, registered with :func:`service`. The decorators record the contract facts the rest
of LIMBO needs — key support, read lag, write class, how a write is read back, how a batch
write is made of units — next to the code that implements them, and the agent-facing tool
schemas and descriptions are generated from the signatures and docstrings (never written by
hand).

State is kept in :class:`VersionedTable` objects that store every version of every row with its commit
time. A read is then a query *as of a horizon*: ``now`` for a strong read path, ``now - lag``
for an eventual one, or an earlier moment when a stale replica answers. One mechanism serves
read lag and stale reads alike.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache, cached_property
from typing import Any, ClassVar, Literal

from limbo.base.errors import UsageError
from limbo.base.hashing import canonical_json
from limbo.base.registry import registrar, shipped_files
from limbo.base.rng import Rng
from limbo.sim.results import Result


class Contract(StrEnum):
    """The tool contract of a world: each write's own key support, or keys on every write."""

    NATIVE = "native"
    KEYS_EVERYWHERE = "keys-everywhere"

    @classmethod
    def parse(cls, value: str) -> Contract:
        """``value`` as a contract; a :class:`UsageError` naming the choices otherwise (a typo
        must never build a world under some other contract)."""
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"unknown contract {value!r}; choose from: "
                             f"{', '.join(c.value for c in cls)}") from None


CONTRACTS: tuple[Contract, ...] = tuple(Contract)

Args = dict[str, Any]
DAY_S = 24 * 3600.0


@dataclass(frozen=True)
class ReadBack:
    """How to see a write's effect: call read ``op`` with ``args``; an item whose fields equal
    ``match`` is the effect. ``parent`` and ``nested`` descend into a list inside matching
    items (a ticket's comments). Resolved into a concrete read by :mod:`limbo.sim.readback`."""

    op: str
    args: Args
    match: Args
    parent: Args | None = None
    nested: str | None = None

    def items(self, result: Result) -> list[dict[str, Any]]:
        """The items of read ``result`` to look through (none when the read failed)."""
        items: list[dict[str, Any]] = list(result.get("items", ())) if result.get("ok") else []
        if self.nested is not None:
            parent = self.parent or {}
            items = [child for item in items if fits(item, parent)
                     for child in item.get(self.nested, ())]
        return items


def fits(item: dict[str, Any], fields: Args) -> bool:
    """Whether ``item`` has every field of ``fields`` with the same value."""
    return all(item.get(k) == v for k, v in fields.items())


@dataclass(frozen=True)
class Batch:
    """How a batch write is made of units — the one place that knows it.

    Argument ``units`` lists the units (``rows``). Each commits as its own effect,
    ``{other arguments..., unit: item}`` (``{"table", "row"}``), and a read shows unit
    ``item`` (a dict) as an item holding all its fields. Recovering from a partial batch means
    re-sending the same call narrowed to the units not yet visible.
    """

    units: str
    unit: str

    def items(self, args: Args) -> list[Any]:
        """The units of a call."""
        return list(args[self.units])

    def narrow(self, args: Args, keep: Iterable[int]) -> Args:
        """The same call with only the units at indexes ``keep``."""
        units = args[self.units]
        return {**args, self.units: [units[i] for i in keep]}

    def basis(self, args: Args) -> Args:
        """The call without its units: what a narrowed re-send has in common with it."""
        return {k: v for k, v in args.items() if k != self.units}

    def effects(self, args: Args) -> list[Args]:
        """The effect each unit commits as, in order."""
        rest = self.basis(args)
        return [{**rest, self.unit: item} for item in args[self.units]]


@dataclass(frozen=True)
class OpSpec:
    """Contract facts of one operation, recorded by :func:`read` / :func:`write`."""

    service: str
    name: str
    kind: Literal["read", "write"]
    func: Callable[..., Result]
    doc: str
    owner: type[Service] = field(compare=False, repr=False)
    """The service class; its other operations are the reads a write is checked with."""
    # reads
    lag: Callable[[Args], float | None] | None = None
    lag_note: str = ""
    # writes
    idempotency: Literal["keyed", "natural", "conditional", "none"] = "none"
    native_key: Callable[[Args], bool] | bool = False
    key_note: str = ""
    key_ttl_native: Callable[[Args], float] | None = None
    reversibility: Literal["reversible", "irreversible"] = "reversible"
    readback: Callable[[Args], ReadBack | None] | None = None
    batch: Batch | None = None
    key_scope: Literal["service", "tool"] = "service"
    """Where a key is unique: across the service's writes (the spec's rule), or per tool."""
    latency: Callable[[Rng], float] | None = None
    """Draws this write's round trip in seconds; ``None``: the grid's ``timing.write_s``."""

    @cached_property
    def tool(self) -> str:
        """The tool's name, ``<service>_<name>``: made once, for it is read at every step of
        every call (the fault's focal check, the endpoint, the ledger, the events)."""
        return f"{self.service}_{self.name}"

    @property
    def key_space(self) -> str:
        """The part of a key's scope after the caller: the service, or this tool."""
        return self.service if self.key_scope == "service" else self.tool

    def accepts_key(self, contract: Contract) -> bool:
        """Whether the tool offers an ``idempotency_key`` parameter under ``contract``."""
        return self.kind == "write" and (contract == Contract.KEYS_EVERYWHERE
                                         or self.native_key is not False)

    def honours_key(self, contract: Contract, args: Args) -> bool:
        """Whether a key sent with ``args`` is honoured (deduplicates) under ``contract``."""
        if self.kind != "write":
            return False
        if contract == Contract.KEYS_EVERYWHERE:
            return True
        return self.native_key(args) if callable(self.native_key) else bool(self.native_key)

    def key_ttl(self, contract: Contract, args: Args) -> float:
        """How long the service remembers a key, in sim seconds."""
        if contract == Contract.NATIVE and self.key_ttl_native is not None:
            return self.key_ttl_native(args)
        return DAY_S

    def write_class(self, contract: Contract, args: Args, read_lag: float | None) -> dict[str, str]:
        """Idempotency / read path / reversibility of this write with these arguments."""
        idem = self.idempotency
        if idem == "none" and self.honours_key(contract, args):
            idem = "keyed"
        if idem == "keyed" and not self.honours_key(contract, args):
            idem = "none"
        path = "none" if read_lag is None else ("strong" if read_lag == 0 else "eventual")
        return {"idempotency": idem, "read_path": path, "reversibility": self.reversibility}


def read(lag: float | Callable[[Args], float | None] = 0.0, note: str = "") -> Callable[..., Any]:
    """Mark a method as a read. ``lag`` (seconds, or a function of the arguments returning
    seconds or ``None`` for "no read path") is how far behind commits the results are."""
    lag_fn = lag if callable(lag) else (lambda _a, _v=float(lag): _v)

    def deco(fn: Callable[..., Result]) -> Callable[..., Result]:
        fn._limbo_op = {"kind": "read", "lag": lag_fn, "lag_note": note}  # type: ignore[attr-defined]
        return fn

    return deco


def write(
    *,
    idempotency: Literal["keyed", "natural", "conditional", "none"] = "none",
    native_key: Callable[[Args], bool] | bool = False,
    key_note: str = "",
    key_ttl_native: Callable[[Args], float] | None = None,
    reversibility: Literal["reversible", "irreversible"] = "reversible",
    readback: Callable[[Args], ReadBack | None] | None = None,
    batch: Batch | None = None,
) -> Callable[..., Any]:
    """Mark a method as a write and record its contract facts (``batch``: how the write is
    made of units, for a batch write)."""

    def deco(fn: Callable[..., Result]) -> Callable[..., Result]:
        fn._limbo_op = {  # type: ignore[attr-defined]
            "kind": "write",
            "idempotency": idempotency,
            "native_key": native_key,
            "key_note": key_note,
            "key_ttl_native": key_ttl_native,
            "reversibility": reversibility,
            "readback": readback,
            "batch": batch,
        }
        return fn

    return deco


class BatchCut(Exception):
    """Raised inside a batch write when the server stops part-way (a partial batch)."""


@dataclass
class Effect:
    """One committed effect, before the ledger stamps it."""

    args: Args
    object_id: str | None
    reverses: str | None = None


@dataclass
class OpContext:
    """What a write sees of the world: the time, and a place to record what it commits."""

    now: float
    unit_limit: int | None = None
    prior_units: list[Any] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)

    def commit(self, args: Args, object_id: str | None, *, reverses: str | None = None) -> None:
        """Record one effect. In a batch, raises :class:`BatchCut` once the limit is reached."""
        if self.unit_limit is not None and len(self.effects) >= self.unit_limit:
            raise BatchCut()
        self.effects.append(Effect(args, object_id, reverses))


@dataclass(frozen=True)
class View:
    """The moment a read observes: rows committed at or before ``horizon`` are visible."""

    horizon: float


class VersionedTable:
    """Rows with their full version history, so any past state can be read back."""

    def __init__(self) -> None:
        self._rows: dict[str, list[tuple[float, dict[str, Any] | None]]] = {}

    def put(self, row_id: str, value: dict[str, Any] | None, t: float) -> None:
        """Write a new version of ``row_id`` at time ``t`` (``None`` deletes it)."""
        self._rows.setdefault(row_id, []).append((t, value))

    def current(self, row_id: str) -> dict[str, Any] | None:
        versions = self._rows.get(row_id)
        return versions[-1][1] if versions else None

    def get(self, row_id: str, view: View) -> dict[str, Any] | None:
        """The row as it was at ``view.horizon`` (``None`` if absent or deleted then)."""
        found: dict[str, Any] | None = None
        for t, value in self._rows.get(row_id, ()):
            if t > view.horizon:
                break
            found = value
        return found

    def scan(self, view: View) -> Iterator[tuple[str, dict[str, Any]]]:
        """Rows visible at ``view``, in creation order."""
        for row_id in self._rows:
            value = self.get(row_id, view)
            if value is not None:
                yield row_id, value


class Service:
    """Base class of the services. Subclasses declare operations with the decorators and
    register with :func:`service`, which names them and collects their operations."""

    name: ClassVar[str]
    ops: ClassVar[dict[str, OpSpec]]

    def __init__(self, seed: int | str) -> None:
        self.seed = seed
        self._counter = 0

    def mint(self, prefix: str) -> str:
        """A fresh, plausible-looking id; deterministic in (seed, service, sequence number):
        the digest of ``[str(seed), name, n]`` in canonical JSON, whose text up to ``n`` is the
        same for every id this service mints, so it is written once."""
        self._counter += 1
        head = self.__dict__.get("_mint_head")
        if head is None:
            head = self._mint_head = canonical_json([str(self.seed), self.name])[:-1]
        text = f"{head},{self._counter}]"
        return f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    def snapshot(self) -> Any:
        """Everything mutable, for a dry run that must leave no trace."""
        return copy.deepcopy(self.__dict__)

    def restore(self, state: Any) -> None:
        self.__dict__.clear()
        self.__dict__.update(state)

    def call(self, op: str, ctx: OpContext | View, args: Args) -> Result:
        """Run operation ``op``; ``ctx`` is an :class:`OpContext` for writes, a :class:`View`
        for reads."""
        return self.ops[op].func(self, ctx, **args)

    @classmethod
    def templates_file(cls) -> Any:
        """Where the service's task templates ship: ``templates/<name>.json`` beside its
        module (a plugin ships its own the same way); ``None`` for a service defined where no
        file is."""
        folder = shipped_files(cls)
        return folder / "templates" / f"{cls.name}.json" if folder is not None else None


_TOOL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _collect_ops(cls: type[Service]) -> None:
    """The operations of a service being registered, as :class:`OpSpec` objects."""
    ops: dict[str, OpSpec] = {}
    for attr, fn in vars(cls).items():
        meta = getattr(fn, "_limbo_op", None)
        if meta is not None:
            doc = inspect.cleandoc(fn.__doc__ or "")
            ops[attr] = OpSpec(service=cls.name, name=attr, func=fn, doc=doc, owner=cls, **meta)
    if not ops:
        raise UsageError(f"service {cls.name!r} declares no operation (@read / @write methods)")
    for op in ops.values():
        if not _TOOL.fullmatch(op.tool):
            raise UsageError(f"service {cls.name!r}: tool name {op.tool!r} must match "
                             f"{_TOOL.pattern} (what model APIs accept)")
    cls.ops = ops


service = registrar("service", Service, pattern=re.compile(r"^[a-z][a-z0-9]{0,23}$"),
                    prepare=_collect_ops)
"""Class decorator: ``@service("billing")`` registers a :class:`Service` subclass as a service
of that name (its tools are ``billing_<operation>``)."""


def operations() -> dict[str, OpSpec]:
    """Every operation of every registered service (plugins included), by tool name; services
    in name order. Shared: do not modify."""
    from limbo.base.registry import entries

    return _operations(tuple(entries("service").values()))


@cache
def _operations(classes: tuple[type[Service], ...]) -> dict[str, OpSpec]:
    return {op.tool: op for cls in classes for op in cls.ops.values()}
