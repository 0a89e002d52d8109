"""``limbo list``: what is registered, one line each (plugins included).

Every listing reads the registry and nothing else, so whatever a plugin registers shows up
like a built-in."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from limbo.commands.common import add_plugin_flag, load_plugins
from limbo.registry import entries


def _services() -> Iterator[str]:
    from limbo.tools import toolset

    native, keyed = toolset("native"), toolset("keys-everywhere")
    for cls in entries("service").values():
        for op in cls.ops.values():
            keys = "key" if native[op.tool].accepts_key else "no key"
            extra = f" (keys-everywhere: {'key' if keyed[op.tool].accepts_key else 'no key'})"
            yield f"{op.tool:<26} {op.kind:<5} native: {keys}{extra if op.kind == 'write' else ''}"


def _faults() -> Iterator[str]:
    for name, cls in entries("fault").items():
        group = getattr(cls, "group", None) or "-"
        yield (f"{name:<18} family={cls.family:<19} group={group:<12} "
               f"sees: {cls.sees}; really: {cls.hidden}")


def _conditions() -> Iterator[str]:
    for name, cls in entries("condition").items():
        yield f"{name:<15} {cls.kind:<8} {cls.summary}"


def _models() -> Iterator[str]:
    from limbo.briefing import ReferenceAdapter
    from limbo.harnesses.policies import PolicyAdapter

    for name, cls in entries("model").items():
        sees = " [reference: briefed with the plan]" if issubclass(cls, ReferenceAdapter) else ""
        yield f"{name + '/…':<15} {cls.__module__:<34} {_first_line(cls)}{sees}"
        if name == "policy":
            for policy, pcls in entries("policy").items():
                params = ", ".join(pcls.model_fields) or "no parameters"
                yield f"  policy/{policy:<14} {_first_line(pcls)} ({params})"
        elif issubclass(cls, PolicyAdapter):
            yield f"  {name}/<policy>  (any reference policy, as with policy/)"


def _first_line(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def _grids() -> Iterator[str]:
    from limbo.errors import UsageError
    from limbo.experiments.grid import builtin_grids, expand, load_grid

    for name in builtin_grids():
        try:
            grid = load_grid(name)
            exp = expand(grid)
            missing = sum(n for reason, n in exp.dropped.items() if reason.startswith("harness"))
            note = f" (+{missing} need harnesses not available here)" if missing else ""
            yield f"{name:<10} {len(exp.cells):>7} episodes  {grid.description}{note}"
        except UsageError as exc:
            yield f"{name:<10} (cannot run here: {exc})"


def _templates() -> Iterator[str]:
    from limbo.tasks import templates

    for name, t in templates().items():
        yield f"{name:<18} service={t.service:<8} focal writes: {', '.join(t.focal_writes)}"


def _harnesses() -> Iterator[str]:
    from limbo.errors import UsageError
    from limbo.harness import availability

    for name, cls in entries("harness").items():
        try:
            ok, detail = availability(name)
        except UsageError as exc:
            ok, detail = False, str(exc)
        where = "available" if ok else "not available here"
        yield f"{name:<12} {_first_line(cls)} ({where}: {detail})"


LISTINGS = {"services": _services, "faults": _faults, "conditions": _conditions,
            "harnesses": _harnesses, "models": _models, "grids": _grids, "templates": _templates}


def listing(what: str) -> Iterator[str]:
    return LISTINGS[what]()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo list`` on the CLI's subparsers."""
    p = sub.add_parser("list", help="what is registered (plugins included)")
    p.add_argument("what", choices=list(LISTINGS), help="which kind of thing to list")
    add_plugin_flag(p)


def run(args: argparse.Namespace) -> int:
    load_plugins(args)
    for line in listing(args.what):
        print(line)
    return 0
