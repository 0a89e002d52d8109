"""The package's rooms stay small and its names say one thing each.

* No module is longer than :data:`MAX_LINES` lines: a longer one holds several concepts and is
  split by concept (the statistics into rates, paired tests, equivalence, GEE; the guard's
  steps apart from how its drivers serve them, a Ray session apart from the runs on it).
* No class name is defined twice anywhere in the package, private ones included: a reader who
  meets ``Request`` or ``KeyStore`` should not have to ask which one (docs/architecture.md).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from test_import_graph import MAPPED, ROOT

MAX_LINES = 400


def package_files(root: Path = ROOT) -> list[Path]:
    """Every Python file the distribution installs (the mapped folders included)."""
    return sorted(p for folder in MAPPED for p in (root / folder).rglob("*.py"))


def long_modules(root: Path = ROOT) -> dict[str, int]:
    """Modules over :data:`MAX_LINES` lines, by path."""
    out = {}
    for path in package_files(root):
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_LINES:
            out[str(path.relative_to(root))] = count
    return out


def class_homes(root: Path = ROOT) -> dict[str, list[str]]:
    """Each class name defined more than once, with where (``path:line``)."""
    homes: dict[str, list[str]] = defaultdict(list)
    for path in package_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                homes[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return {name: where for name, where in homes.items() if len(where) > 1}


def test_no_module_is_longer_than_four_hundred_lines() -> None:
    assert len(package_files()) > 200
    assert long_modules() == {}


def test_no_class_name_is_defined_twice() -> None:
    assert class_homes() == {}


def test_the_checks_find_a_long_module_and_a_second_class(tmp_path: Path) -> None:
    (tmp_path / "limbo").mkdir()
    (tmp_path / "services").mkdir()
    (tmp_path / "limbo" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "limbo" / "a.py").write_text("class Request:\n    pass\n")
    (tmp_path / "services" / "b.py").write_text("def f():\n    class Request:\n        pass\n")
    assert long_modules(tmp_path) == {"limbo/big.py": MAX_LINES + 1}
    assert class_homes(tmp_path) == {"Request": ["limbo/a.py:1", "services/b.py:2"]}
