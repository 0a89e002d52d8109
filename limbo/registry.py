"""One typed registry for every extension kind.

Services, faults, conditions, model providers and grids register themselves with a decorator
at import time; plugins add more through the ``limbo.<kind>s`` entry-point groups or
``--plugin``. Lookups sort by name, so registration order never reaches the simulation.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar

from limbo.errors import UsageError
from limbo.hashing import digest

Kind = Literal["service", "fault", "condition", "model", "grid", "harness"]
T = TypeVar("T")

_REGISTRY: dict[str, dict[str, Any]] = {}
_BUILTINS: dict[str, tuple[str, ...]] = {
    "service": ("limbo.services",),
    "fault": ("limbo.faults",),
    "condition": ("limbo.harnesses.conditions", "limbo.harnesses.scaffolds"),
    "model": ("limbo.harnesses.policies", "limbo.providers"),
    "grid": ("limbo.experiments",),
    "harness": ("limbo.harnesses.minimal",),
}
_loaded: set[str] = set()
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
"""A registered name: it appears in grids, model specs (``provider/model``) and file names."""


def register(kind: Kind, name: str) -> Callable[[T], T]:
    """Class or function decorator: make ``obj`` findable as ``name`` of ``kind``."""

    if not isinstance(name, str) or not NAME.match(name):
        raise UsageError(f"cannot register {kind} {name!r}: a name is letters, digits, '.', '_' "
                         f"and '-' (at most 64, starting with a letter or digit)")

    def deco(obj: T) -> T:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not obj:
            raise UsageError(f"{kind} {name!r} is registered twice (by {_origin(table[name])} "
                             f"and {_origin(obj)}); rename one")
        table[name] = obj
        return obj

    return deco


def _origin(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"


def _load(kind: Kind) -> None:
    if kind in _loaded:
        return
    _loaded.add(kind)
    for module in _BUILTINS[kind]:
        importlib.import_module(module)
    for ep in entry_points(group=f"limbo.{kind}s"):
        ep.load()


def entries(kind: Kind) -> dict[str, Any]:
    """Everything registered under ``kind``, sorted by name."""
    _load(kind)
    table = _REGISTRY.get(kind, {})
    return {name: table[name] for name in sorted(table)}


def lookup(kind: Kind, name: str) -> Any:
    """The object registered as ``name``; a :class:`UsageError` naming the choices if absent."""
    table = entries(kind)
    if name not in table:
        raise UsageError(f"unknown {kind} {name!r}; choose from: {', '.join(table) or '(none)'}")
    return table[name]


def load_plugin(spec: str) -> None:
    """Import a plugin given as a dotted module name or a path to a ``.py`` file; whatever the
    plugin does wrong (a syntax error, an exception, ``SystemExit`` at import) is one
    :class:`UsageError` naming it."""
    for kind in _BUILTINS:  # built-ins first, so a plugin that reuses a name is the one refused
        _load(kind)  # type: ignore[arg-type]
    path = Path(spec)
    if spec.endswith(".py") or os.sep in spec or path.exists():
        _load_file(spec, path)
        return
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", spec):
        raise UsageError(f"plugin {spec!r} is neither a .py file nor a dotted module name")
    try:
        importlib.import_module(spec)
    except ImportError as exc:
        raise UsageError(f"cannot import plugin {spec!r}: {exc}") from None
    except BaseException as exc:
        _reraise_plugin(spec, exc)


def _load_file(spec: str, path: Path) -> None:
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise UsageError(f"plugin file {spec!r} {what}")
    if path.suffix != ".py":
        raise UsageError(f"plugin file {spec!r} must be a Python file ending in .py")
    stem = path.stem if path.stem.isidentifier() and path.stem.isascii() else "file"
    mod_name = f"limbo_plugin_{stem}_{digest(os.fsencode(path.resolve()).hex(), 8)}"
    if mod_name in sys.modules:  # already loaded (a repeated flag, a forked worker)
        return
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"plugin file {spec!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[mod_name]
        _reraise_plugin(spec, exc)


def _reraise_plugin(spec: str, exc: BaseException) -> NoReturn:
    if isinstance(exc, (UsageError, KeyboardInterrupt)):
        raise exc
    raise UsageError(f"plugin {spec} failed to load: {type(exc).__name__}: {exc}") from None
