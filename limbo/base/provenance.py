"""Which code ran: the git commit and whether the tree was dirty, for run manifests.

Asked of the code that is actually running, never of the current directory or of whatever
repository happens to enclose the installed package:

- **a checkout** (an editable install, or the source tree on ``sys.path``): the package's folder
  sits in the source tree, whose git top level is the folder holding ``limbo/``; git is asked
  there. A wheel installed into a virtualenv inside some other repository is not a checkout:
  that repository's top level is not the package's parent, so its commit is never reported.
- **a build** (a wheel): the running package cannot ask git, so the build baked the commit and
  the dirty flag of the tree it was built from into ``limbo/_build_info.json``
  (:mod:`limbo._build`).
- otherwise (a wheel built from an sdist or without git) the commit is ``"unknown"``.

Standard library only: the build step loads this file by path, before ``limbo`` is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

BUILD_INFO = "_build_info.json"
UNKNOWN = "unknown"


def provenance() -> dict[str, Any]:
    """``git_commit``, ``git_dirty`` (``None`` when unknown) and ``git_source`` (``checkout``,
    ``build`` or ``unknown``) of the running package."""
    package = Path(__file__).resolve().parents[1]
    found = git_state(package.parent)
    if found is not None:
        return {**found, "git_source": "checkout"}
    baked = _baked(package / BUILD_INFO)
    if baked is not None:
        return {**baked, "git_source": "build"}
    return {"git_commit": UNKNOWN, "git_dirty": None, "git_source": "unknown"}


def git_state(root: Path) -> dict[str, Any] | None:
    """The commit of the checkout whose top level is ``root`` and whether its tree differs from
    it (changed or untracked files that are not ignored); ``None`` when ``root`` is not the top
    level of a git checkout, or git is missing."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root.resolve():
        return None
    commit, status = _git(root, "rev-parse", "HEAD"), _git(root, "status", "--porcelain")
    if not commit or status is None:
        return None
    return {"git_commit": commit, "git_dirty": bool(status)}


def _git(root: Path, *args: str) -> str | None:
    """git's output in ``root``, stripped; ``None`` when it fails. ``GIT_*`` variables of the
    caller (a hook's ``GIT_DIR``, say) are dropped so that git looks at ``root`` itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _baked(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("git_commit"), str):
        return None
    dirty = raw.get("git_dirty")
    return {"git_commit": raw["git_commit"], "git_dirty": dirty if isinstance(dirty, bool) else None}
