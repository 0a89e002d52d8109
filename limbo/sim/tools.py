"""Agent-facing tool definitions, generated from the services' code for one contract.

Each operation becomes a tool named ``<service>_<op>`` whose argument schema is a pydantic model
built from the method signature (strict, unknown fields forbidden, strings capped), and whose
description is the docstring plus generated sentences on key support and read lag — so the
text the agent reads can never drift from what the code does.
"""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from limbo.base.registry import entries
from limbo.sim.service import DAY_S, Contract, OpSpec, Service

MAX_STRING = 8000
KEY_FIELD = "idempotency_key"
Key = Annotated[str, StringConstraints(min_length=1, max_length=255)]
BoundedStr = Annotated[str, StringConstraints(max_length=MAX_STRING)]


class StrictArgs(BaseModel):
    """Base of every tool's argument model. ``allow_inf_nan=False`` reaches floats nested in
    rows, lists and unions too: NaN and Infinity are not JSON, so a record holding one could
    not be written or read back as strict JSON."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the agent sees it, plus the facts the sandbox needs about it."""

    name: str
    kind: Literal["read", "write", "utility"]
    description: str
    model: type[BaseModel]
    op: OpSpec | None = None

    @cached_property
    def accepts_key(self) -> bool:
        """Asked on every call; the model's fields never change (a tool is built once)."""
        return KEY_FIELD in self.model.model_fields

    def schema(self) -> dict[str, Any]:
        """JSON schema of the arguments (what providers receive as ``parameters``)."""
        return _schema(self.model)


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def bounded(annotation: Any) -> Any:
    """``annotation`` with every ``str`` inside it capped — nested in rows, lists and unions
    too, so an oversized string is refused wherever an agent puts it."""
    if annotation is str:
        return BoundedStr
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return Annotated[(bounded(args[0]), *annotation.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(bounded(a) for a in args)]
    if origin is list:
        return list[bounded(args[0])]  # type: ignore[misc]
    if origin is dict:
        return dict[bounded(args[0]), bounded(args[1])]  # type: ignore[misc]
    return annotation


def _fields(op: OpSpec) -> dict[str, Any]:
    """The fields of ``op``'s arguments model, without the key."""
    hints = typing.get_type_hints(op.func, include_extras=True)
    fields: dict[str, Any] = {}
    for name, param in list(inspect.signature(op.func).parameters.items())[2:]:
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (bounded(hints[name]), default)
    return fields


def _notes(op: OpSpec) -> tuple[str, str, str]:
    """``op``'s description, with what it says of idempotency: under the native contract where
    the service documents its own key, where it accepts a key, and where it does not."""
    doc = " ".join(op.doc.split())
    if op.kind == "read":
        text = f"{doc} {op.lag_note or 'Strongly consistent: shows a write as soon as it commits.'}"
        return text, text, text
    hours = int(DAY_S // 3600)
    keyed = (f"{doc} Accepts an optional idempotency_key: a repeat with the same key and the "
             f"same arguments returns the first result instead of acting again (keys are kept "
             f"{hours} h; the same key with other arguments returns 422).")
    plain = f"{doc} Not idempotent: every call acts again." if op.idempotency == "none" else doc
    return f"{doc} {op.key_note}" if op.key_note else "", keyed, plain


def _service_tool(op: OpSpec, contract: Contract) -> ToolSpec:
    fields, (native, keyed_note, plain) = _fields(op), _notes(op)
    keyed = op.accepts_key(contract)
    if keyed:
        fields[KEY_FIELD] = (Key | None, None)
    text = native if contract == Contract.NATIVE and native else keyed_note if keyed else plain
    model = create_model(f"{op.tool}_args", __base__=StrictArgs, **fields)
    return ToolSpec(op.tool, op.kind, text, model, op)


class WaitArgs(StrictArgs):
    seconds: float = Field(gt=0, le=3600)


class FinishArgs(StrictArgs):
    status: Literal["completed", "partial", "failed"]
    summary: BoundedStr
    uncertain_actions: Annotated[list[BoundedStr], Field(max_length=50)] = []


UTILITY_TOOLS = (
    ToolSpec("wait", "utility", "Wait the given number of seconds (at most 3600) before "
             "continuing. Use it to let slow systems catch up.", WaitArgs),
    ToolSpec("finish", "utility", "End the task with a final report: status (completed, "
             "partial or failed), a short summary, and the actions whose outcome you are not "
             "sure of.", FinishArgs),
)


def toolset(contract: Contract | str,
            services: tuple[type[Service], ...] | None = None) -> dict[str, ToolSpec]:
    """Every tool offered under ``contract``: the tools of ``services`` (default: the
    registered services, in name order, so the order never depends on which module registered
    first), then the utilities. A contract that is not one of :class:`Contract` is a
    :class:`UsageError`. Shared: do not modify."""
    return _toolset(Contract.parse(contract),
                    services if services is not None else tuple(entries("service").values()))


@cache
def _toolset(contract: Contract, services: tuple[type[Service], ...]) -> dict[str, ToolSpec]:
    tools = {op.tool: _service_tool(op, contract) for cls in services for op in cls.ops.values()}
    for spec in UTILITY_TOOLS:
        tools[spec.name] = spec
    return tools
