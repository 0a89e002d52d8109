"""One typed registry for every extension kind.

Services, faults, conditions, model providers and grids register themselves with a decorator
at import time; plugins add more through the ``limbo.<kind>s`` entry-point groups or
``--plugin``. Lookups sort by name, so registration order never reaches the simulation.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, TypeVar

from limbo.errors import UsageError
from limbo.hashing import digest

Kind = Literal["service", "fault", "condition", "model", "grid", "harness"]
T = TypeVar("T")

_REGISTRY: dict[str, dict[str, Any]] = {}
_BUILTINS: dict[str, tuple[str, ...]] = {
    "service": ("limbo.services",),
    "fault": ("limbo.faults",),
    "condition": ("limbo.harnesses.conditions", "limbo.harnesses.scaffolds"),
    "model": ("limbo.harnesses.policies", "limbo.providers", "limbo.inspect.adapter"),
    "grid": ("limbo.experiments",),
    "harness": ("limbo.harnesses.minimal", "limbo.harnesses.production"),
}
_loaded: set[str] = set()


def register(kind: Kind, name: str) -> Callable[[T], T]:
    """Class or function decorator: make ``obj`` findable as ``name`` of ``kind``."""

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
    """Import a plugin given as a dotted module name or a path to a ``.py`` file."""
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise UsageError(f"plugin file {spec!r} does not exist")
        mod_name = f"limbo_plugin_{path.stem}_{digest(str(path.resolve()), 8)}"
        if mod_name in sys.modules:  # already loaded (a repeated flag, a forked worker)
            return
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's file, reported in one line
            del sys.modules[mod_name]
            raise UsageError(f"plugin {spec} failed to load: {type(exc).__name__}: {exc}") from None
        return
    try:
        importlib.import_module(spec)
    except ImportError as exc:
        raise UsageError(f"cannot import plugin {spec!r}: {exc}") from None
