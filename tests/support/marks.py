"""Which tests leave the fast loop, and why: the one table ``tests/conftest.py`` marks them from.

``make check`` runs the tests marked none of ``slow``, ``harness``, ``ray``, ``browser``; ``make
test`` (and CI) runs them all. A key is a test file, or ``file::test`` for one test of a file
that is otherwise fast. ``harness``, ``ray`` and ``browser`` say what a test needs (a production
harness CLI, a Ray cluster, a headless chromium) and are checked against what the file uses
(``tests/test_marks.py``); ``slow`` is measured: the seconds beside each entry are its wall time
in one ``pytest --durations=0`` run on the 2-core development machine, under load.
"""

from __future__ import annotations

import re

MARKS: dict[str, tuple[str, ...]] = {
    # production harness CLIs (LIMBO_HARNESS_DIR)
    "test_harnesses_failures.py": ("harness",),
    "test_harnesses_guard.py": ("harness", "slow"),
    "test_harnesses_install.py": ("harness",),
    "test_harnesses_production.py": ("harness", "slow"),
    "test_proxy_harness.py": ("harness",),
    "test_worldfile_harness.py": ("harness",),
    # a Ray cluster on 127.0.0.1
    "test_ray_executor.py": ("ray", "slow"),
    "test_ray_limiter.py": ("ray",),
    "test_ray_stream.py": ("ray",),
    "test_scale_docs.py::test_the_ray_commands_use_flags_that_exist": ("ray",),
    # Debian's headless chromium, driven by Playwright
    "test_report_browser.py": ("browser",),
    # slow: measured
    "test_analysis_paper.py": ("slow",),
    "test_grid_runner.py": ("slow",),
    "test_readme.py": ("slow",),
}
"""Test file (or ``file::test``) -> its markers."""

MARKERS = ("slow", "harness", "ray", "browser")
"""The markers of this table, as ``pyproject.toml`` registers them."""


def marks_of(nodeid: str) -> tuple[str, ...]:
    """The markers the table gives the test ``nodeid`` (``tests/test_x.py::test_y[param]``)."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    function = name.split("[", 1)[0]
    return (*MARKS.get(file, ()), *MARKS.get(f"{file}::{function}", ()))


def skipped_whole(file: str, markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every test of ``file``, read from the table alone, so
    that the fast loop need not even import it (its imports are a good part of a fast run).
    Only the fast loop's form, ``not a and not b ...``, is read; any other expression says
    no, and pytest's own selection decides test by test."""
    if not re.fullmatch(r"not \w+( and not \w+)*", markexpr.strip()):
        return False
    excluded = set(re.findall(r"not (\w+)", markexpr))
    return bool(excluded & set(MARKS.get(file, ())))
