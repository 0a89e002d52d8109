"""No function or method of the package is longer than 50 lines (decorators not counted,
docstring and body included): a longer one does several things and is split."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("limbo", "services", "faults", "harnesses", "experiments", "analysis")
MAX_LINES = 50


def lengths() -> dict[str, int]:
    """Every function's length in lines, by ``file:line name``."""
    out = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    out[where] = node.end_lineno - node.lineno + 1
    return out


def test_no_function_is_longer_than_fifty_lines() -> None:
    found = lengths()
    assert len(found) > 500  # the whole package was read
    assert {where: n for where, n in found.items() if n > MAX_LINES} == {}
