"""The world has one face: outside :mod:`limbo.sim`, code uses a :class:`~limbo.sim.world.World`
only through the names in :data:`limbo.sim.world.FACE`.

The scan reads every module of the package outside ``limbo/sim`` that names ``World``, and
finds the expressions that hold a world there: a name called ``world``, a parameter annotated
``World``, ``self.world``, and what a tuple assignment or a plain assignment copies from them.
Any attribute read on one of those beyond the face is a finding. It is a reading of the source,
so an alias it cannot see (a world passed through a container) escapes it; the test below
proves it catches the forms the package uses.
"""

from __future__ import annotations

import ast

from test_import_graph import MAPPED, ROOT, modules

from limbo.sim.cell import Cell
from limbo.sim.world import FACE, World


def _holds_world(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    return (isinstance(node, ast.Attribute) and node.attr in ("world", "_world")
            and isinstance(node.value, ast.Name) and node.value.id == "self")


def _annotated_world(arg: ast.arg) -> bool:
    ann = arg.annotation
    text = ast.unparse(ann) if ann is not None else ""
    return "World" in text.replace("WorldFile", "").replace("WorldTemplate", "")


def _world_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The local names of ``fn`` that hold a world."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    names = {"world"} | {a.arg for a in args if _annotated_world(a)}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        pairs: list[tuple[ast.expr, ast.expr]] = []
        for target in node.targets:
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs.extend(zip(target.elts, node.value.elts, strict=False))
            else:
                pairs.append((target, node.value))
        for target, value in pairs:
            if isinstance(target, ast.Name) and _holds_world(value, names):
                names.add(target.id)
    return names


def reads_beyond_face(source: str, where: str) -> list[str]:
    """``where:line: name`` for every attribute read on a world that is not in the face."""
    found = []
    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = _world_names(fn)
        for node in ast.walk(fn):
            if (isinstance(node, ast.Attribute) and _holds_world(node.value, names)
                    and node.attr not in FACE):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def _names_world(source: str) -> bool:
    return "limbo.sim.world import" in source and "World" in source


def test_nothing_outside_the_sim_floor_reads_past_the_worlds_face() -> None:
    sim = ROOT / "limbo" / "sim"
    found = []
    for _, path in sorted(modules(ROOT, MAPPED).items()):
        if path.is_relative_to(sim):
            continue
        source = path.read_text()
        if _names_world(source):
            found += reads_beyond_face(source, str(path.relative_to(ROOT)))
    assert not found, "read a World only through limbo.sim.world.FACE:\n" + "\n".join(found)


def test_the_scan_finds_each_form_of_reading_past_the_face() -> None:
    source = (
        "def a(world):\n    return world.boundary\n"
        "def b(w: World):\n    w.env.run(until=3)\n"
        "class H:\n"
        "    def c(self):\n        self.world.ledger.append(1)\n"
        "    def d(self):\n        world, lim = self.world, 1\n        return world.log\n"
        "    def e(self):\n        x = self.world\n        return x.fault, x.now, x.call\n")
    found = reads_beyond_face(source, "m.py")
    assert {f.split(": ")[1] for f in found} == {
        "world.boundary", "w.env", "self.world.ledger", "world.log", "x.fault"}


def test_every_name_of_the_face_is_on_the_world() -> None:
    world = World.of(Cell(model="policy/verify", fault="none", service="billing",
                          template="charge_invoice", focal_write="charge_invoice"))
    missing = [name for name in FACE if not hasattr(world, name)]
    assert not missing
