"""The build step that bakes provenance into a wheel (see :mod:`limbo.base.provenance`).

setuptools loads this module by path through ``[tool.setuptools.cmdclass]`` in
``pyproject.toml`` while it builds; nothing imports it at run time (it needs setuptools). An
editable install is left alone: it runs the source tree, whose git state is read live.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent


def _provenance() -> ModuleType:
    """:mod:`limbo.base.provenance`, loaded from the source tree (``limbo`` is not installed yet)."""
    spec = importlib.util.spec_from_file_location("_limbo_provenance", SOURCE / "base" / "provenance.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(build_py):
    """``build_py``, plus ``limbo/_build_info.json``: the commit of the tree being built and
    whether it was dirty (``"unknown"`` when the tree is not a git checkout)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        found = _provenance()
        state = found.git_state(SOURCE.parent) or {"git_commit": found.UNKNOWN, "git_dirty": None}
        target = Path(self.build_lib) / "limbo" / found.BUILD_INFO
        target.write_text(json.dumps(state) + "\n", encoding="utf-8")
