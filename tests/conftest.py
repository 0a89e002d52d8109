"""Shared fixtures. Tests run against the installed package (``import limbo``), never a bare
top-level folder."""

from __future__ import annotations

import gc

import pytest
from support.cells import cell_for
from support.marks import marks_of, skipped_whole


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test from the one table of what leaves the fast loop (support/marks.py)."""
    for item in items:
        for name in marks_of(item.nodeid):
            item.add_marker(name)


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    """A file the fast loop's ``-m`` deselects whole is not imported at all."""
    expr = config.getoption("markexpr")
    return True if expr and skipped_whole(collection_path.name, expr) else None


@pytest.fixture(scope="module")
def gw():
    """A model gateway on 127.0.0.1, shared by a module's provider tests, that can stage
    provider failures (support/staged.py)."""
    from support.staged import StagedThreadedGateway

    with StagedThreadedGateway() as gateway:
        yield gateway


@pytest.fixture
def make_cell():
    return cell_for


@pytest.fixture(autouse=True)
def _process_wide_cache(monkeypatch: pytest.MonkeyPatch):
    """An in-process ``limbo run`` configures the response cache for the whole process (and
    its environment, for workers); undo that after each test so no test answers another's
    model calls from a cache."""
    from limbo.providers import cache

    monkeypatch.delenv(cache.ENV, raising=False)
    yield
    cache.reset()


@pytest.fixture(autouse=True)
def _collectable_heap():
    """An in-process ``limbo run`` freezes the heap for the rest of its process
    (:func:`limbo.run.local.freeze_heap`); give it back to the collector after each test, so the
    test process does not keep every cycle a test made before it."""
    yield
    gc.unfreeze()
