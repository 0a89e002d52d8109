"""Where the production harnesses are installed, at which pinned versions, and how.

The project installs each harness at a pinned version into a project-local directory — by
default ``.harnesses/`` in the checkout (``make harnesses``; ``make test`` does it too), or
wherever ``LIMBO_HARNESS_DIR`` points: the three npm CLIs under ``npm/`` (one ``npm install
--prefix``), hermes-agent in its own virtual environment under ``hermes-agent/`` (it pins an older
``mcp`` than limbo's). Nothing is installed globally, and the user's own installations are never
used: these CLIs change fast, and a different version is a different harness.

Run ``python -m limbo.harnesses.production`` to install what is missing; it is quick
when everything is present at its pinned version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ENV = "LIMBO_HARNESS_DIR"
DIR_NAME = ".harnesses"
INSTALL_HINT = ("install with `make harnesses` in the limbo checkout (python -m "
                "limbo.harnesses.production), or point LIMBO_HARNESS_DIR at an installation")


@dataclass(frozen=True)
class Install:
    """One pinned harness installation."""

    kind: Literal["npm", "venv"]
    package: str
    """The npm package, or the Python distribution for a venv."""
    version: str
    executable: str
    """The command, relative to the installation's root."""
    extras: str = ""
    """Python extras to install with the distribution (``[mcp]``)."""

    def root(self, base: Path) -> Path:
        """All npm CLIs share ``npm/``; each venv has its own folder, named by its package."""
        return base / ("npm" if self.kind == "npm" else self.package)

    def spec(self) -> str:
        if self.kind == "npm":
            return f"{self.package}@{self.version}"
        return f"{self.package}{self.extras}=={self.version}"

    def installed_version(self, base: Path) -> str | None:
        """The version found under ``base``, or ``None`` when not installed."""
        root = self.root(base)
        if self.kind == "npm":
            meta = root / "node_modules" / self.package / "package.json"
            try:
                return str(json.loads(meta.read_text())["version"])
            except (OSError, ValueError, KeyError):
                return None
        dist = self.package.replace("-", "_")
        found = sorted(root.glob(f"lib/python3*/site-packages/{dist}-*.dist-info"))
        return found[-1].name[len(dist) + 1:-len(".dist-info")] if found else None

    def command(self, base: Path) -> Path:
        return self.root(base) / self.executable


def harness_dir() -> Path:
    """``$LIMBO_HARNESS_DIR``, else the nearest ``.harnesses`` directory at or above the
    current directory, else ``./.harnesses`` (where an install would go)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser().resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / DIR_NAME).is_dir():
            return folder / DIR_NAME
    return here / DIR_NAME


def status(install: Install, base: Path | None = None) -> tuple[bool, str]:
    """(available, what was found or why not, with the fix)."""
    base = base or harness_dir()
    found = install.installed_version(base)
    if found == install.version and install.command(base).exists():
        return True, f"{install.spec()} in {install.root(base)}"
    if found is None:
        return False, f"{install.spec()} not found in {install.root(base)}; {INSTALL_HINT}"
    return False, f"{install.package} {found} found, {install.version} pinned; {INSTALL_HINT}"


def install_all(installs: list[Install], base: Path) -> list[str]:
    """Install every missing or mismatched pin; returns what was done."""
    done: list[str] = []
    npm = [i for i in installs if i.kind == "npm" and status(i, base)[0] is False]
    if npm:
        root = npm[0].root(base)
        root.mkdir(parents=True, exist_ok=True)
        _run(["npm", "install", "--prefix", str(root), "--no-fund", "--no-audit",
              "--loglevel=error", *[i.spec() for i in installs if i.kind == "npm"]])
        done += [i.spec() for i in npm]
    for venv in (i for i in installs if i.kind == "venv" and status(i, base)[0] is False):
        root = venv.root(base)
        if not (root / "bin" / "python").exists():
            _run([sys.executable, "-m", "venv", str(root)])
        _run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", venv.spec()])
        done.append(venv.spec())
    return done


def _run(argv: list[str]) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True)


def main() -> int:
    from limbo.base.registry import entries

    installs = [cls.install for cls in entries("harness").values() if getattr(cls, "install", None)]
    base = harness_dir()
    done = install_all(installs, base)
    for install in installs:
        ok, detail = status(install, base)
        print(f"{'ok ' if ok else 'MISSING'} {detail}")
        if not ok:
            return 1
    print(f"installed: {', '.join(done)}" if done else "all harnesses present")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
