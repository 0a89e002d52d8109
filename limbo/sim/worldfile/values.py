"""Whether a value fits a tool's argument: the strict check the boundary makes of every call,
made here of the values a world file writes itself — an argument's ``default`` and ``enum``, a
key's honoured values, a read-back's fixed arguments, the arguments of template steps — so a
value no call could carry is a problem ``limbo world check`` names, not an episode's
``invalid_argument`` or ``infra_error``.

The types are those the tool layer gives the agent's calls (:func:`annotation`, capped by
:func:`limbo.sim.tools.bounded`), so the check cannot drift from what a run accepts.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, ValidationError, create_model

from limbo.sim.tools import StrictArgs, bounded
from limbo.sim.worldfile.format import Arg

Value = str | int | float | bool | None
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                            "object": Annotated[dict[str, Value], Field(max_length=30)]}
TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
              "boolean": "true or false", "object": "a table of scalar fields",
              "list": "a list"}


def annotation(arg: Arg) -> Any:
    """The type an argument's value must have (the tool layer makes it strict)."""
    base: Any
    if arg.enum is not None:
        base = Literal[tuple(arg.enum)]
    elif arg.type == "list":
        assert arg.items is not None
        item: Any = _SCALARS[arg.items]
        base = Annotated[list[item],
                         Field(min_length=arg.min_length, max_length=arg.max_length)]
    elif arg.type == "string":
        base = Annotated[str, StringConstraints(min_length=arg.min_length,
                                                max_length=arg.max_length)]
    elif arg.type in ("integer", "number"):
        base = Annotated[_SCALARS[arg.type], Field(ge=arg.min, le=arg.max)]
    else:
        base = _SCALARS[arg.type]
    return base | None if arg.default is None and not arg.required else base


def unusable_name(name: str) -> str | None:
    """Why ``name`` cannot name an argument (``None``: it can). Each operation is a Python
    function taking ``(self, ctx, **arguments)`` and validated by a pydantic model, so a
    keyword, ``self``, ``ctx``, a leading ``_`` (pydantic drops the field) or ``model_`` (its
    own namespace) would break the build or silently lose the argument."""
    if keyword.iskeyword(name) or name in ("self", "ctx"):
        return f"{name!r} is reserved in Python (LIMBO makes each tool a function)"
    if name.startswith(("_", "model_")):
        return f"{name!r} starts with {'_' if name.startswith('_') else 'model_'}, which " \
               f"pydantic keeps for itself (the argument would be lost or break the tool)"
    return None


class Fits:
    """The arguments of one tool, to check values against (a model built once, checked one
    field at a time)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self._model = model
        self._blank = model.model_construct()

    @classmethod
    def of_args(cls, tool: str, args: Mapping[str, Arg]) -> Fits:
        """A world tool's arguments (those with a usable name)."""
        fields: Any = {n: (bounded(annotation(a)), None) for n, a in args.items()
                       if unusable_name(n) is None}
        return cls(create_model(f"{tool}_args", __base__=StrictArgs, **fields))

    def misfit(self, name: str, value: Any) -> str | None:
        """Why ``value`` is no value of argument ``name`` (``None``: it is, or there is no such
        argument — another rule names that)."""
        if name not in self._model.model_fields:
            return None
        try:
            self._model.__pydantic_validator__.validate_assignment(self._blank, name, value)
        except ValidationError as exc:
            return "; ".join(err["msg"] for err in exc.errors(include_url=False)[:2])
        return None


def arg_misfits(arg: Arg) -> list[tuple[str, str]]:
    """The argument's own values that no call could pass: (field, why) for its ``default``
    and each ``enum`` value (checked without the enum, against the type and bounds)."""
    found: list[tuple[str, str]] = []
    plain = Fits.of_args("arg", {"value": arg.model_copy(update={"enum": None})})
    for value in arg.enum or ():
        why = plain.misfit("value", value)
        if why is not None:
            found.append(("enum", f"enum value {value!r} is not {_kind(arg, False)}: {why}"))
    if arg.default is not None:
        full = Fits.of_args("arg", {"value": arg})
        why = full.misfit("value", arg.default)
        if why is not None:
            found.append(("default", f"default {arg.default!r} is not {_kind(arg)}: {why}; "
                                     f"write a default the argument accepts, or drop it"))
    return found


def _kind(arg: Arg, enum: bool = True) -> str:
    bounds = [f"{k} {v:g}" for k, v in (("min", arg.min), ("max", arg.max)) if v is not None]
    bounds += [f"{k} {v}" for k, v in (("min_length", arg.min_length),
                                        ("max_length", arg.max_length)) if v is not None]
    said = TYPE_NAMES[arg.type] + (f" ({', '.join(bounds)})" if bounds else "")
    return said if arg.enum is None or not enum else f"{said}, one of the enum"
