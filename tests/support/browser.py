"""Headless Debian Chromium driven by Playwright, for the report's browser tests and benchmark.

Only the system's ``chromium`` is used (``make test`` installs Debian's package); Playwright's
own browser download is never needed. Each launch gets a fresh profile directory (Playwright
makes one per launch). Without a browser the tests skip with the reason, except under CI
(``CI`` set), where a missing browser fails them: CI must run them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTEFACTS = Path(__file__).resolve().parents[2] / "test-artefacts" / "report"
"""Screenshots land here (git-ignored)."""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if chromium() is None:
        return "Debian's chromium is not installed (make test installs it: apt-get install chromium)"
    return None


def require() -> None:
    """Skip (or, under CI, fail) when the browser cannot run."""
    import pytest

    why = missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser tests: {why}")
        pytest.skip(why)


@contextmanager
def launch() -> Iterator[Any]:
    """A headless Chromium (Playwright ``Browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def shot(page: Any, name: str, **kw: Any) -> Path:
    """Save a screenshot as a test artefact."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    page.screenshot(path=str(path), **kw)
    return path
