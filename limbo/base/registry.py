"""One typed registry for every extension kind.

Services, faults, conditions, reference policies, harnesses and model providers each register
through one decorator per kind, defined next to the kind's base class (``@service``,
``@fault``, ``@condition``, ``@policy``, ``@harness``, ``@model_adapter``). The decorator is
the only place a thing is named: it sets the name on the class, so there is no second copy to
keep in agreement, and it refuses a class of the wrong base with one line naming it.

Built-ins register exactly as plugins do: LIMBO's own pyproject names its built-in modules in
the ``limbo.<kind>s`` entry-point groups (``limbo.services``, ``limbo.policies``, ...), where an
installed plugin names its own, and a kind's modules are imported the first time the kind is
looked up (LIMBO's own first, so a plugin reusing a built-in name is the one refused);
``--plugin`` adds more. This floor names no module above it. Lookups sort by name, so
registration and import order never reach the simulation.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from importlib import resources
from importlib.metadata import EntryPoints, entry_points
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar, get_args

from limbo.base.errors import UsageError
from limbo.base.hashing import digest

Kind = Literal["service", "fault", "condition", "policy", "harness", "model"]
KINDS: tuple[Kind, ...] = get_args(Kind)
GROUPS: dict[Kind, str] = {
    "service": "limbo.services", "fault": "limbo.faults", "condition": "limbo.conditions",
    "policy": "limbo.policies", "harness": "limbo.harnesses", "model": "limbo.models",
}
"""The entry-point group through which an installed distribution extends each kind."""

T = TypeVar("T")

_REGISTRY: dict[str, dict[str, Any]] = {}
OWN = "limbo-bench"
"""LIMBO's own distribution: its entry points (the built-ins) load before any plugin's."""
_loaded: set[str] = set()
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


def registrar(kind: Kind, base: type, *, attr: str = "name", pattern: re.Pattern[str] = _NAME,
              prepare: Callable[[Any], None] | None = None) -> Callable[[str], Callable[[T], T]]:
    """The decorator factory of one kind: ``registrar(kind, Base)(name)`` registers a
    subclass of ``Base`` as ``name`` and sets ``cls.<attr> = name``.

    ``prepare(cls)`` runs after the name is set and before the class becomes visible; it checks
    and completes what the kind needs (a service's operations, a condition's prompt files) and
    raises :class:`UsageError` for what is wrong.
    """

    def named(name: str) -> Callable[[T], T]:
        def deco(cls: T) -> T:
            _check(kind, name, cls, base, attr, pattern)
            setattr(cls, attr, name)
            try:
                if prepare is not None:
                    prepare(cls)
            except BaseException:
                delattr(cls, attr)
                raise
            _REGISTRY.setdefault(kind, {})[name] = cls
            return cls

        return deco

    return named


def _check(kind: Kind, name: str, cls: Any, base: type, attr: str,
           pattern: re.Pattern[str]) -> None:
    if not isinstance(name, str) or not pattern.fullmatch(name):
        raise UsageError(f"{kind} name {name!r} must match {pattern.pattern}")
    if not isinstance(cls, type):
        raise UsageError(f"{kind} {name!r}: {_origin(cls)} must be a class, not a "
                         f"{type(cls).__name__}")
    if not issubclass(cls, base):
        got = ", ".join(b.__qualname__ for b in cls.__bases__)
        raise UsageError(f"{kind} {name!r}: {_origin(cls)} must subclass "
                         f"{base.__module__}.{base.__qualname__} (it is based on {got})")
    table = _REGISTRY.get(kind, {})
    if name in table and table[name] is not cls:
        raise UsageError(f"{kind} {name!r} is registered twice (by {_origin(table[name])} "
                         f"and {_origin(cls)}); rename one")
    if attr in vars(cls):
        earlier = [n for n, c in table.items() if c is cls]
        why = (f"is already registered as {earlier[0]!r}" if earlier else
               f"sets {attr!r} itself; the decorator names it, delete the attribute")
        raise UsageError(f"{kind} {name!r}: {_origin(cls)} {why}")


def shipped_files(cls: type) -> Traversable | None:
    """The folder holding the files shipped beside ``cls``'s module — its package for a module
    inside a package (``templates/``, ``prompts/`` live there), the file's folder for a
    stand-alone module such as a ``--plugin`` file; ``None`` for a class defined where no file
    is (an interactive session, ``exec``)."""
    module = sys.modules.get(cls.__module__)
    if module is None:
        return None
    if getattr(module, "__path__", None) is not None:
        return resources.files(module)
    if module.__package__:
        return resources.files(module.__package__)
    file = getattr(module, "__file__", None)
    return Path(file).resolve().parent if file else None


def _origin(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"


def _load(kind: Kind) -> None:
    if kind in _loaded:
        return
    _loaded.add(kind)  # first, so a plugin that looks its kind up while importing sees a table
    try:
        _load_entry_points(kind)
    except BaseException:
        _loaded.discard(kind)  # a later lookup fails the same way, never on a partial table
        raise


@functools.cache
def _installed() -> dict[str, EntryPoints]:
    """The installed entry points of each of LIMBO's groups, read once per process: a read
    opens every installed distribution's metadata (about 7 % of ``limbo run``'s start-up when
    each kind read them anew, with the test extras installed)."""
    everything = entry_points()
    return {group: everything.select(group=group) for group in GROUPS.values()}


def _load_entry_points(kind: Kind) -> None:
    found = _installed()[GROUPS[kind]]
    if not any(_dist(ep) == OWN for ep in found):
        raise UsageError(f"LIMBO's own entry points for {GROUPS[kind]} are missing: the package "
                         f"is not installed (pip install -e . in the checkout)")
    for ep in sorted(found, key=lambda ep: (_dist(ep) != OWN, _dist(ep), ep.name)):
        try:
            ep.load()
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - an installed plugin, reported in one line
            raise UsageError(f"plugin {ep.value} (entry point {ep.name!r} of {GROUPS[kind]}, "
                             f"distribution {_dist(ep)}) failed to load: "
                             f"{type(exc).__name__}: {exc}") from None


def _dist(ep: Any) -> str:
    return ep.dist.name if ep.dist is not None else "?"


def entries(kind: Kind) -> dict[str, Any]:
    """Everything registered under ``kind``, sorted by name."""
    if kind not in GROUPS:
        raise UsageError(f"unknown registry kind {kind!r}; choose from: {', '.join(KINDS)}")
    _load(kind)
    table = _REGISTRY.get(kind, {})
    return {name: table[name] for name in sorted(table)}


def lookup(kind: Kind, name: str) -> Any:
    """The object registered as ``name``; a :class:`UsageError` naming the choices if absent."""
    _load(kind)
    found = _REGISTRY.get(kind, {}).get(name)
    if found is None:
        table = entries(kind)
        raise UsageError(f"unknown {kind} {name!r}; choose from: {', '.join(table) or '(none)'}")
    return found


def load_plugin(spec: str) -> None:
    """Import a plugin given as a dotted module name or a path to a ``.py`` file; whatever the
    plugin does wrong (a syntax error, an exception, ``SystemExit`` at import) is one
    :class:`UsageError` naming it."""
    for kind in KINDS:  # built-ins first, so a plugin that reuses a name is the one refused
        _load(kind)
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
    except BaseException as exc:  # noqa: BLE001 - whatever the plugin raised is one line
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
    except BaseException as exc:  # noqa: BLE001 - whatever the plugin raised is one line
        del sys.modules[mod_name]
        _reraise_plugin(spec, exc)


def _reraise_plugin(spec: str, exc: BaseException) -> NoReturn:
    from limbo.base.interrupts import from_user

    if isinstance(exc, UsageError) or (isinstance(exc, KeyboardInterrupt) and from_user()):
        raise exc
    detail = f": {exc}" if str(exc) else ""
    raise UsageError(f"plugin {spec} failed to load: {type(exc).__name__}{detail}") from None
