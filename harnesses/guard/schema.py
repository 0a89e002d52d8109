"""Step 1 of the guard: turn raw arguments into validated, canonical ones.

A tool's schema is a pydantic model, or is built from the tool function's signature. Either
way unknown fields are refused, values are coerced to the declared types, and no non-finite
number (NaN, ±inf) gets through — JSON cannot carry one, so a write that received one could
never be fingerprinted or replayed faithfully. The canonical form (sorted-key JSON of the
validated values) is what fingerprints and derived keys are computed from, so two calls that
mean the same thing get the same key however their arguments were spelled.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

MAX_KEY_CHARS = 255


class Invalid(Exception):
    """The arguments were rejected; the message says why (without echoing the values)."""


def model_from_callable(fn: Callable[..., Any], name: str,
                        key_param: str | None = None) -> type[BaseModel]:
    """A pydantic model of ``fn``'s parameters (unknown fields and NaN/inf refused).

    ``key_param``, if given, becomes an optional string field whatever ``fn`` declares, so a
    caller can send its key there."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints.get(pname, Any), default)
    if key_param is not None:
        fields[key_param] = (str | None, None)
    config = ConfigDict(extra="forbid", allow_inf_nan=False)
    return create_model(f"{name}_args", __config__=config, **fields)


def _finite(value: Any, path: str = "") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(f"{path or '(arguments)'}: non-finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _finite(v, f"{path}[{i}]")


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


@lru_cache(maxsize=1024)
def _known_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names and aliases a model declares, once per model (every guarded call asks)."""
    return frozenset(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}


def _no_unknown_fields(model: type[BaseModel], raw: Mapping[str, Any]) -> None:
    """Refuse fields the schema does not declare, even if the model would silently drop them
    (pydantic's default): a caller who sent ``note`` must not believe it was used. Only a
    model that says ``extra="allow"`` accepts more."""
    if model.model_config.get("extra") == "allow":
        return
    known = _known_fields(model)
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(unknown[:5])}")


def validate(model: type[BaseModel], raw: Any) -> dict[str, Any]:
    """Validated, coerced arguments as plain Python values; :class:`Invalid` otherwise."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise Invalid(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise Invalid("arguments must be an object")
    _finite(raw)
    _no_unknown_fields(model, raw)
    try:
        values = model.model_validate(dict(raw)).model_dump()
    except ValidationError as exc:
        raise Invalid(_describe(exc)) from None
    _finite(values)
    return values


def check_key(key: Any) -> str:
    """A caller-supplied idempotency key, checked."""
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
        raise Invalid(f"idempotency key must be a non-empty string of at most {MAX_KEY_CHARS} characters")
    return key


def canonical(obj: Any) -> str:
    """Sorted-key JSON with no insignificant whitespace (NaN refused)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=_jsonable)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if isinstance(obj, bytes):
        return obj.hex()
    return str(obj)  # dates, decimals, UUIDs, enums: their canonical text


def _sha(obj: Any) -> str:
    return hashlib.sha256(canonical(obj).encode()).hexdigest()


def fingerprint(tool: str, args: dict[str, Any]) -> str:
    """What a key is bound to: the tool and its validated arguments (key excluded)."""
    return _sha(["fingerprint", tool, args])


def derived_key(caller: str, tool: str, args: dict[str, Any]) -> str:
    """The key of a write whose caller gave none: the same call by the same caller maps to the
    same key, and nobody else's call ever does."""
    return "g-" + _sha(["key", caller, tool, args])[:40]
