"""No import cycle among the package's modules.

The graph is built statically (``ast``) over every module the distribution installs, the mapped
folders included, and counts every import a module can execute — those inside functions too, as
a lazy import that closes a cycle still ties two modules into one (the CLI once imported
``commands.run``, which imported the CLI back). Imports under ``if TYPE_CHECKING:`` never run,
but a type that names another module is knowledge of it: the package has no cycle with them
counted either (two modules that need each other's types say what they need as a ``Protocol``,
as :mod:`limbo.proxy.inject` and :mod:`limbo.providers.preflight` do).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"limbo": "limbo", "services": "limbo.services", "faults": "limbo.faults",
          "harnesses": "limbo.harnesses", "experiments": "limbo.experiments",
          "analysis": "limbo.analysis"}


def modules(root: Path, mapped: dict[str, str]) -> dict[str, Path]:
    """Every module by dotted name (a package by its ``__init__``)."""
    found = {}
    for folder, prefix in mapped.items():
        for path in (root / folder).rglob("*.py"):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _targets(node: ast.Import | ast.ImportFrom, package: str, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    base = node.module or ""
    if node.level:
        parts = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    out = set()
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in known:
            out.add(submodule)
        elif base in known:
            out.add(base)
    return out


def import_graph(found: dict[str, Path], type_checking: bool = False) -> dict[str, set[str]]:
    """Each module's imports of other modules of the package (with ``type_checking``, those
    under ``if TYPE_CHECKING:`` too)."""
    known, graph = set(found), {}
    for name, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skip = set() if type_checking else _type_checking_only(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skip:
                edges |= _targets(node, package, known)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = modules(ROOT, MAPPED)
    graph = import_graph(found)
    # the CLI imports its command table; each command is imported when it runs (issue 40)
    assert len(found) > 100 and "limbo.commands" in graph["limbo.cli"]
    assert "limbo.run.runner" in graph["limbo.commands.run"]
    assert "limbo.experiments.grid" in graph["limbo.commands.episode"]  # a lazy import counts
    assert cycles(graph) == []


def test_the_package_has_no_cycle_even_through_type_checking_imports() -> None:
    graph = import_graph(modules(ROOT, MAPPED), type_checking=True)
    assert "limbo.sim.world" in graph["limbo.episode.harness"]  # a TYPE_CHECKING import counts
    assert "limbo.sim.world" not in import_graph(modules(ROOT, MAPPED))["limbo.episode.harness"]
    assert cycles(graph) == []


def test_the_check_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nimport pkg.a\n"
                              "if TYPE_CHECKING:\n    from pkg import d\n")
    (pkg / "d.py").write_text("from pkg import c\n")
    graph = import_graph(modules(tmp_path, {"pkg": "pkg"}))
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    with_types = import_graph(modules(tmp_path, {"pkg": "pkg"}), type_checking=True)
    assert cycles(with_types) == [["pkg.a", "pkg.c", "pkg.d", "pkg.sub.b"]]
