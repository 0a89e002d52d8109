"""What a fresh install of LIMBO can import, for running the README's examples as a new user
would after its install command (``make run``: ``pip install -e .``, no extra).

:func:`block` installs an import hook that refuses any top-level module outside the standard
library and the distributions ``limbo-bench`` requires without an extra (followed through
their own requirements). The test venv has every extra installed; under the hook, code that
leans on one (``httpx``, which only the SDK extras bring) fails exactly as it would on a fresh
install. :func:`launcher` writes a ``limbo`` executable that runs the CLI under the hook, so a
command can be run as printed, from a shell, with that executable first on ``PATH``.
"""

from __future__ import annotations

import re
import site
import sys
from importlib import metadata
from importlib.abc import MetaPathFinder
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

ROOT_DIST = "limbo-bench"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_closure(root: str = ROOT_DIST) -> set[str]:
    """The distributions ``root`` needs without any extra, transitively (normalised names)."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            marker = requirement.partition(";")[2]
            if "extra" in marker:
                continue
            found = _NAME.match(requirement.strip())
            if found:
                todo.append(found.group(0))
    return seen


def allowed_modules() -> set[str]:
    """Top-level modules a fresh install provides: the standard library's, and those of the
    core distributions (``limbo`` itself included)."""
    closure = core_closure()
    tops = {top for top, dists in metadata.packages_distributions().items()
            if any(_norm(d) in closure for d in dists)}
    return {*sys.stdlib_module_names, *tops, "limbo"}


class _Fresh(MetaPathFinder):
    """Refuses a top-level module that only an installed distribution outside the core
    closure provides (found in site-packages); anything else is found as usual."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.site = [str(Path(p).resolve()) for p in site.getsitepackages()]

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        top, dot, _ = fullname.partition(".")
        if dot or top in self.allowed or top.startswith(("limbo_plugin_", "__editable__")):
            return None  # let the real finders find it
        spec = PathFinder.find_spec(fullname, path)
        origin = str(Path(spec.origin).resolve()) if spec and spec.origin else ""
        if spec is None or spec.origin is None and not spec.submodule_search_locations:
            return None  # nobody provides it: the import fails as it would anyway
        locations = [origin, *(str(Path(p).resolve()) for p in
                               spec.submodule_search_locations or [])]
        if not any(loc.startswith(s) for loc in locations if loc for s in self.site):
            return None  # the standard library (or a file beside the caller)
        raise ModuleNotFoundError(f"No module named {fullname!r} (not in a fresh install of "
                                  f"{ROOT_DIST})", name=fullname)


def block() -> None:
    """From now on, import only what a fresh install provides."""
    sys.meta_path.insert(0, _Fresh(allowed_modules()))


def launcher(bindir: Path) -> Path:
    """A ``limbo`` executable in ``bindir`` that runs the CLI as a fresh install would."""
    bindir.mkdir(parents=True, exist_ok=True)
    exe = bindir / "limbo"
    support = Path(__file__).resolve().parent.parent
    exe.write_text(f"#!{sys.executable}\n"
                   f"import sys\nsys.path.insert(0, {str(support)!r})\n"
                   f"from support.fresh_install import block\nblock()\n"
                   f"from limbo.cli import main\nsys.exit(main())\n")
    exe.chmod(0o755)
    return exe
