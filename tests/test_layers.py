"""The package is a house of floors: each module imports only its own room and the floors below.

The floors, bottom to top, are :data:`FLOORS` (docs/architecture.md draws them and walks one
cell through them). A room is one or more folders whose modules may import each other freely;
an import of a room on a higher floor, or of another room on the same floor, is a violation.
The analysis is narrower still: it reads the log and nothing else (:data:`NARROW`).

Every import a module can execute counts, and so do the ones that never run: an import inside
a function (a lazy import still ties two floors) and one under ``if TYPE_CHECKING:`` (a type
that names a higher floor is knowledge of it). No module is exempt: the registry
(:mod:`limbo.base.registry`) finds the built-in services, faults, conditions, harnesses and
models through the entry points of LIMBO's own pyproject, as it finds a plugin's, and names no
module above the ground floor (:func:`test_the_ground_floor_names_no_module_above_it`).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from test_import_graph import MAPPED, ROOT, import_graph, modules

from limbo.base.registry import GROUPS

FLOORS: list[tuple[str, list[tuple[str, ...]]]] = [
    ("base", [("limbo", "limbo.base", "limbo.errors", "limbo._build")]),
    ("sim", [("limbo.sim",)]),
    ("content", [("limbo.services",), ("limbo.faults",)]),
    ("log", [("limbo.log",)]),
    ("episode", [("limbo.episode", "limbo.adapter")]),
    ("providers", [("limbo.providers",)]),
    ("gateway", [("limbo.gateway",)]),
    ("harnesses", [("limbo.harnesses",)]),
    ("experiments", [("limbo.experiments",)]),
    ("run, inspect, proxy", [("limbo.run",), ("limbo.inspect",), ("limbo.proxy",)]),
    ("analysis", [("limbo.analysis",)]),
    ("commands", [("limbo.commands",)]),
    ("cli", [("limbo.cli",)]),
]
"""Floors from the ground up; each is a list of rooms, each room a tuple of packages."""
NARROW = {"limbo.analysis": ("limbo.base", "limbo.log")}
"""Rooms that may import fewer floors than all those below: the analysis reads only the log
(and the ground floor); what it once took from today's grids and registries — fault families,
tool kinds, the built-in grids' design for runs that recorded none — the log layer or the
command hands it."""


def room_of(module: str) -> tuple[int, str]:
    """(floor number, the room's first package) of ``module``: the longest package that holds
    it (``limbo`` itself holds only its own ``__init__``)."""
    best: tuple[int, str, str] | None = None
    for number, (_, rooms) in enumerate(FLOORS):
        for room in rooms:
            for package in room:
                inside = module == package or (package != "limbo" and
                                               module.startswith(package + "."))
                if inside and (best is None or len(package) > len(best[2])):
                    best = (number, room[0], package)
    if best is None:
        raise AssertionError(f"{module} stands in no room of FLOORS: give it one")
    return best[0], best[1]


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that runs up, sideways into another room, or out of a narrow room."""
    found = []
    for module, targets in sorted(graph.items()):
        floor, room = room_of(module)
        for target in sorted(targets):
            to_floor, to_room = room_of(target)
            if to_room == room:
                continue
            allowed = NARROW.get(room)
            if to_floor >= floor or (allowed is not None and
                                     to_room not in {room_of(a)[1] for a in allowed}):
                found.append(f"{module} ({FLOORS[floor][0]}) imports {target} "
                             f"({FLOORS[to_floor][0]})")
    return found


def test_each_floor_imports_only_the_floors_below_it() -> None:
    found = modules(ROOT, MAPPED)
    graph = import_graph(found, type_checking=True)
    assert len(graph) > 200
    assert {room_of(m)[0] for m in graph} == set(range(len(FLOORS)))  # every floor is lived in
    assert violations(graph) == []


def test_the_analysis_never_asks_todays_registry() -> None:
    """The ground floor is the analysis's to import, all but the registry: what a run's
    conditions, faults and tools were is in its log, and a plugin loaded today, or a built-in
    changed since, must not move a number."""
    graph = import_graph(modules(ROOT, MAPPED), type_checking=True)
    asking = sorted(m for m, targets in graph.items()
                    if room_of(m)[1] == "limbo.analysis" and "limbo.base.registry" in targets)
    assert asking == []


def test_the_ground_floor_names_no_module_above_it() -> None:
    """Not even as a string for ``importlib``: a dotted name of a higher floor in the ground
    floor's code is knowledge of that floor. (An entry-point group, ``limbo.services``, is a
    name plugins register under, not a module.)"""
    named = re.compile(r"limbo\.(" + "|".join(
        p.removeprefix("limbo.") for _, rooms in FLOORS[1:] for room in rooms for p in room
        if p.startswith("limbo.")) + r")\b")
    for module, path in modules(ROOT, MAPPED).items():
        if room_of(module)[0] == 0:
            code = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                             if not line.lstrip().startswith("#"))
            found = [m.group(0) for m in named.finditer(_code_only(code))
                     if f'"{m.group(0)}"' not in GROUP_NAMES]
            assert not found, f"{module} names {found}"


GROUP_NAMES = {f'"{g}"' for g in GROUPS.values()}


def _code_only(text: str) -> str:
    """``text`` without its docstrings (a docstring may say where things are)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = ""
    return ast.unparse(tree)


def test_the_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    """A copy of the package with three upward imports planted — a plain one, a lazy one in a
    function, one under TYPE_CHECKING — and one the analysis may not make: each is found."""
    for folder in MAPPED:
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "static", "*.txt"))
    plant = {"limbo/base/hashing.py": "from limbo.commands import run\n",
             "limbo/sim/results.py": "def _f():\n    from limbo.run import runner\n",
             "limbo/log/rated.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from limbo.episode import run_one\n",
             "analysis/pairing.py": "from limbo.sim import tools\n"}
    for path, line in plant.items():
        with (tmp_path / path).open("a", encoding="utf-8") as fh:
            fh.write("\n" + line)
    graph = import_graph(modules(tmp_path, MAPPED), type_checking=True)
    assert violations(graph) == [
        "limbo.analysis.pairing (analysis) imports limbo.sim.tools (sim)",
        "limbo.base.hashing (base) imports limbo.commands.run (commands)",
        "limbo.log.rated (log) imports limbo.episode.run_one (episode)",
        "limbo.sim.results (sim) imports limbo.run.runner (run, inspect, proxy)",
    ]


def test_a_module_outside_every_room_is_refused() -> None:
    try:
        room_of("limbo.attic.box")
    except AssertionError as exc:
        assert "stands in no room" in str(exc)
    else:
        raise AssertionError("a module outside every room was given one")
