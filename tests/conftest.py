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
def _no_user_cache(monkeypatch: pytest.MonkeyPatch):
    """No test answers its model calls from the user's response cache (``LIMBO_CACHE_DIR``);
    and an in-process ``limbo run`` leaves no cache or price files chosen behind it (they are
    bound around its episodes only, :mod:`limbo.providers.options`)."""
    from limbo.providers import cache, options

    monkeypatch.delenv(cache.ENV, raising=False)
    yield
    assert options.current() is None, "provider options left bound after the test"


@pytest.fixture(autouse=True)
def _collectable_heap():
    """An in-process ``limbo run`` freezes the heap for the rest of its process
    (:func:`limbo.run.local.freeze_heap`); give it back to the collector after each test, so the
    test process does not keep every cycle a test made before it."""
    yield
    gc.unfreeze()
