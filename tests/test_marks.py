"""The fast loop's table (support/marks.py) holds: every entry names a test that exists, every
marker is registered (pytest runs with ``--strict-markers``), a test file that needs a
production harness, a Ray cluster or a browser is marked so (and a mark is not left on one
that no longer does), and ``make check`` deselects exactly the table's markers while ``make
test`` selects everything.

What cannot be read from the source is whether a test is slow: that is measured, and ``make
check`` prints the fast set's slowest tests so that one that grew slow is seen and entered."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

from support.marks import MARKERS, MARKS, SLOW, half_of, marks_of, skipped_whole

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@functools.cache
def _tree(file: str) -> ast.Module:
    return ast.parse((TESTS / file).read_text(encoding="utf-8"))


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _skips_without_ray(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "importorskip" and n.args
               and isinstance(n.args[0], ast.Constant) and n.args[0].value == "ray"
               for n in ast.walk(node))


def _asks_for_a_harness(node: ast.AST) -> bool:
    """Whether ``node`` asks if a production harness is installed (and skips without it)."""
    return any(isinstance(n, ast.Call) and (
        isinstance(n.func, ast.Name) and n.func.id == "availability"
        or isinstance(n.func, ast.Attribute) and n.func.attr == "availability")
        for n in ast.walk(node))


def needs(file: str) -> dict[str, set[str]]:
    """What the source of ``file`` says it needs: marker -> the table keys that may carry it
    (the file, or a test function when only that function needs it)."""
    tree = _tree(file)
    imports = _imports(tree)
    found: dict[str, set[str]] = {}
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if "support.harness_runs" in imports:
        found["harness"] = {file}
    elif any(_asks_for_a_harness(f) for f in functions):
        found["harness"] = {file, *(f"{file}::{f.name}" for f in functions
                                    if _asks_for_a_harness(f))}
    if "playwright" in imports or any(m.startswith("playwright.") for m in imports) \
            or "support.browser" in imports:
        found["browser"] = {file}
    module_level = [n for n in tree.body if not isinstance(n, ast.FunctionDef)]
    if "support.ray_cluster" in imports or "ray" in imports \
            or any(_skips_without_ray(n) for n in module_level):
        found["ray"] = {file}
    elif any(_skips_without_ray(f) for f in functions):
        found["ray"] = {file, *(f"{file}::{f.name}" for f in functions if _skips_without_ray(f))}
    return found


def test_every_entry_names_a_test_that_exists() -> None:
    for key in [*MARKS, *SLOW]:
        file, _, function = key.partition("::")
        assert (TESTS / file).is_file(), f"{key}: no such test file"
        if function:
            names = {n.name for n in _tree(file).body if isinstance(n, ast.FunctionDef)}
            assert function in names, f"{key}: no such test in {file}"


def test_every_marker_is_registered_and_strict() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in options["markers"]}
    assert registered == set(MARKERS)
    assert {m for marks in MARKS.values() for m in marks} <= set(MARKERS)
    assert "--strict-markers" in options["addopts"]


def test_files_that_need_a_harness_ray_or_a_browser_are_marked_so() -> None:
    for path in sorted(TESTS.glob("test_*.py")):
        file = path.name
        said = needs(file)
        for marker, keys in said.items():
            assert any(marker in MARKS.get(key, ()) for key in keys), \
                f"{file} needs {marker}: add it to tests/support/marks.py"
        for key, marks in MARKS.items():
            if key.partition("::")[0] == file:
                for marker in set(marks) - {"slow"}:
                    assert key in said.get(marker, set()), \
                        f"{key} is marked {marker} but does not use it"


def test_a_key_marks_its_file_or_its_one_test() -> None:
    assert marks_of("tests/test_ray_stream.py::test_x[a-b]") == ("ray",)
    scale = "tests/test_scale_docs.py::test_the_ray_commands_use_flags_that_exist"
    assert marks_of(scale) == ("ray",) and marks_of(scale + "[p]") == ("ray",)
    assert marks_of("tests/test_scale_docs.py::test_other") == ()
    assert marks_of("tests/test_readme.py::test_x") == ("slow",)
    assert marks_of("tests/test_harnesses_guard.py::test_x[a]") == ("harness", "slow")


def test_only_a_file_deselected_whole_is_left_unimported() -> None:
    fast = "not slow and not harness and not ray and not browser"
    assert skipped_whole("test_ray_stream.py", fast)
    assert not skipped_whole("test_scale_docs.py", fast)  # one test of it is ray, not the file
    assert not skipped_whole("test_marks.py", fast)
    assert not skipped_whole("test_ray_stream.py", "not slow")
    assert not skipped_whole("test_ray_stream.py", "ray or not slow")  # not the fast form


def test_make_check_deselects_the_markers_and_make_test_runs_everything() -> None:
    make = (ROOT / "Makefile").read_text()
    fast = re.search(r"^FAST := (.*)$", make, re.M)
    assert fast is not None
    assert fast.group(1) == " and ".join(f"not {m}" for m in MARKERS)
    check = re.search(r"^check:.*?\n((?:\t.*\n)+)", make, re.M)
    test = re.search(r"^test:.*?\n((?:\t.*\n)+)", make, re.M)
    assert check is not None and test is not None
    assert '$(BIN)/pytest -m "$(FAST)"' in check.group(1)
    assert "$(BIN)/ruff check ." in check.group(1) and "tools/typecheck.py" in check.group(1)
    # the whole suite: all but the Ray tests in the two fixed halves, then the Ray tests alone
    assert re.search(r'^\t\$\(BIN\)/pytest -n 2 --dist loadgroup -m "not ray"\n'
                     r'\t\$\(BIN\)/pytest -m ray$', test.group(1), re.M)


def test_the_two_halves_split_the_files_and_keep_each_file_whole() -> None:
    """Every file falls in one half by its name (its tests, whatever their parameters, with it);
    the process-starting families (harness CLIs, Ray) in theirs, and neither half empty."""
    files = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    halves = {f: half_of(f"tests/{f}::test_x[1]") for f in files}
    assert set(halves.values()) == {"processes", "in-process"}
    assert all(halves[f] == half_of(f"tests/{f}") for f in files)
    assert all(halves[f] == "processes" for f, m in MARKS.items() if m[0] in ("harness", "ray")
               and "::" not in f)
    assert halves["test_analysis_paper.py"] == "in-process"
