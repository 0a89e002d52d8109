"""``limbo list``: what is registered, one line each (plugins included); and ``limbo list
episodes RUN_DIR``: a run's episodes, one line each, with their outcome.

Every listing of what is registered reads the registry and nothing else, so whatever a plugin
registers shows up like a built-in. The episodes are read like every reader reads them: the
run's ``episodes*.jsonl``, each episode once (superseded and quarantined lines are not the
run's), filtered by ``--model``, ``--termination`` and ``--fault`` (each repeatable; an episode
shows when it matches one value of every filter given)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from limbo.base.errors import UsageError
from limbo.base.registry import entries
from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, load_plugins


def _services() -> Iterator[str]:
    from limbo.sim.tools import toolset

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
    from limbo.episode.briefing import ReferenceAdapter
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
    """What a class says it is, for a listing: the first sentence of its docstring, without
    the reStructuredText markup written for the API documentation (``x``, :class:`a.B`)."""
    doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    doc = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", doc)
    doc = doc.replace("``", "")
    sentence = re.match(r"(.+?[.!?])(?:\s|$)", doc)
    return sentence.group(1) if sentence else doc


def _grids() -> Iterator[str]:
    from limbo.base.errors import UsageError
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
    from limbo.sim.tasks import templates

    for name, t in templates().items():
        yield f"{name:<18} service={t.service:<8} focal writes: {', '.join(t.focal_writes)}"


def _harnesses() -> Iterator[str]:
    from limbo.base.errors import UsageError
    from limbo.episode.harness import availability

    for name, cls in entries("harness").items():
        try:
            ok, detail = availability(name)
        except UsageError as exc:
            ok, detail = False, str(exc)
        where = "available" if ok else "not available here"
        yield f"{name:<12} {_first_line(cls)} ({where}: {detail})"


LISTINGS = {"services": _services, "faults": _faults, "conditions": _conditions,
            "harnesses": _harnesses, "models": _models, "grids": _grids, "templates": _templates}
FILTERS = ("model", "termination", "fault")


def listing(what: str) -> Iterator[str]:
    return LISTINGS[what]()


def episodes(run_dir: Path, wanted: dict[str, list[str]]) -> Iterator[str]:
    """One line per episode of ``run_dir`` that passes the filters: id, termination, the
    graded flags, and the cell."""
    from limbo.log.store import iter_records

    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    for record in iter_records(run_dir):
        cell, outcome = record["cell"], record["outcome"]
        seen = {"model": cell.get("model"), "fault": cell.get("fault"),
                "termination": outcome.get("termination")}
        if any(values and seen[name] not in values for name, values in wanted.items()):
            continue
        flags = " ".join(f"{short}={'yes' if outcome.get(name) else 'no'}" for name, short in
                         (("duplicate", "dup"), ("task_success", "TS"), ("exactly_once", "EOS")))
        yield (f"{record['episode_id']}  {seen['termination']:<11} {flags}  {cell.get('model')}"
               f" · {cell.get('harness')} · {cell.get('condition')} · {cell.get('contract')} · "
               f"{cell.get('fault')} · {cell.get('template')}#{cell.get('instance')}"
               f" {cell.get('focal_write')}")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo list`` on the CLI's subparsers."""
    p = command_parser(sub, "list")
    p.add_argument("what", choices=[*LISTINGS, "episodes"], help="which kind of thing to list")
    p.add_argument("run_dir", nargs="?", type=Path, metavar="RUN_DIR",
                   help="with `episodes`: the run directory")
    for name in FILTERS:
        p.add_argument(f"--{name}", action="append", default=[], metavar=name.upper(),
                       help=f"with `episodes`: only those of this {name} (repeatable)")
    add_plugin_flag(p)


def run(args: argparse.Namespace) -> int:
    load_plugins(args)
    wanted = {name: getattr(args, name) for name in FILTERS}
    if args.what != "episodes":
        given = [f"--{n}" for n, v in wanted.items() if v] + (["RUN_DIR"] if args.run_dir else [])
        if given:
            raise UsageError(f"{', '.join(given)}: only `limbo list episodes RUN_DIR` takes them")
        lines = listing(args.what)
    else:
        if args.run_dir is None:
            raise UsageError("limbo list episodes needs the run directory: limbo list episodes "
                             "RUN_DIR")
        _check_terminations(wanted["termination"])
        lines = episodes(args.run_dir, wanted)
    for line in lines:
        print(line)
    return 0


def _check_terminations(given: list[str]) -> None:
    from limbo.sim.events import TERMINATIONS

    for value in given:
        if value not in TERMINATIONS:
            raise UsageError(f"--termination {value!r}: choose from {', '.join(TERMINATIONS)}")
