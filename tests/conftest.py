"""Shared fixtures. Tests run against the installed package (``import limbo``), never a bare
top-level folder."""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

import pytest
from support.cells import cell_for
from support.marks import half_of, marks_of, skipped_whole

USER_SETTINGS = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE", "RAY_ADDRESS",
                 "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
"""Settings of the user's own tools that would otherwise reach the processes the tests start."""


def pytest_configure(config: pytest.Config) -> None:
    """The session runs in a home of its own, empty: what the user's tools keep there (Ray's
    ``~/.ray/auth_token`` turns token authentication on for every ``ray start``; a harness CLI's
    settings; caches) never reaches a test. Set here, before any test module is imported, so
    every process the tests start inherits it."""
    home = tempfile.mkdtemp(prefix="limbo-test-home-")
    config.add_cleanup(lambda: shutil.rmtree(home, ignore_errors=True))
    os.environ["HOME"] = home
    for name in USER_SETTINGS:
        os.environ.pop(name, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test from the one table of what leaves the fast loop (support/marks.py), and,
    under pytest-xdist, with the half of the suite its worker runs (:func:`half_of`)."""
    halves = config.pluginmanager.hasplugin("xdist")
    for item in items:
        for name in marks_of(item.nodeid):
            item.add_marker(name)
        if halves:
            item.add_marker(pytest.mark.xdist_group(half_of(item.nodeid)))


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
