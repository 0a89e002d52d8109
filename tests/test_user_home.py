"""The tests never read the user's home: a session runs in a home of its own (tests/conftest.py).

A machine where Ray has been used keeps a token in ``~/.ray/auth_token``; every ``ray start``
then expects token authentication, and a test cluster started without the token fails at setup.
A child test session started with such a home still starts its cluster and passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import USER_SETTINGS

ROOT = Path(__file__).resolve().parents[1]


def test_the_session_home_is_an_empty_one_of_its_own() -> None:
    home = Path.home()
    assert home.name.startswith("limbo-test-home-")
    assert not (home / ".ray").exists()
    assert not set(USER_SETTINGS) & set(os.environ)


def test_a_ray_token_in_the_users_home_does_not_reach_a_test_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("0123456789abcdef0123456789abcdef\n")
    env = {**os.environ, "HOME": str(home), "RAY_AUTH_TOKEN_PATH": str(home / ".ray/auth_token")}
    test = "tests/test_ray_limiter.py::test_the_slots_of_two_workers_never_pass_the_limit"
    done = subprocess.run([sys.executable, "-m", "pytest", test],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
    assert (home / ".ray" / "auth_token").exists()  # the user's file is left as it was
