"""``limbo run`` freezes the heap it starts its episodes with (``gc.freeze``): the collector's
full passes during the run then walk only what the episodes made, not the modules, SDKs and
cells that live until the process exits. Library calls leave their caller's heap alone."""

from __future__ import annotations

import gc
from pathlib import Path

from limbo.cli import main
from limbo.run.context import RunContext
from limbo.run.runner import run_cells


def walked(obj: object) -> bool:
    """Whether the cyclic collector's passes still look at ``obj``."""
    return any(o is obj for o in gc.get_objects())


def test_what_a_limbo_run_starts_with_is_no_longer_walked_by_the_collector(tmp_path: Path):
    gc.unfreeze()
    held = [["alive before the run"]]
    assert walked(held)
    assert main(["run", "--out", str(tmp_path / "run"), "--quiet", "--model", "policy/verify",
                 "--fault", "none", "--limit", "3"]) == 0
    assert (tmp_path / "run" / "episodes.jsonl").read_bytes().count(b"\n") == 3
    assert not walked(held)
    after = [["made after the run"]]
    assert walked(after)  # the collector still sees what is made later


def test_a_library_run_leaves_its_callers_heap_to_the_collector(tmp_path: Path, make_cell):
    gc.unfreeze()
    held = [["the caller's"]]
    result = run_cells([make_cell("charge_invoice")], RunContext(out=tmp_path / "run"), {})
    assert result.ran == 1
    assert walked(held)
    assert gc.get_freeze_count() == 0
