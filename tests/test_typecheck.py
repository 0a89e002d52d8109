"""tools/typecheck.py hands mypy every module of the package under the name an import gives
it; a wrong mapping would type-check `services.mail` while the code imports
`limbo.services.mail`, and every cross-package type would silently become unresolved."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mypy")
_spec = importlib.util.spec_from_file_location("typecheck", ROOT / "tools" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typecheck)


def test_every_module_is_checked_under_the_name_python_imports_it_by() -> None:
    package = [s for s in typecheck.sources() if s.module != "typecheck"]
    assert len(package) > 100
    for source in package:
        spec = importlib.util.find_spec(source.module)
        assert spec is not None and spec.origin is not None, source.module
        assert Path(spec.origin).resolve() == (ROOT / source.path).resolve(), source.module


def test_every_package_setuptools_installs_is_checked() -> None:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = set(table["tool"]["setuptools"]["packages"])
    assert installed <= {s.module for s in typecheck.sources()}
