"""The ``analysis`` extra: the commands that need it say so in one line instead of a traceback.

``import limbo`` and ``limbo run`` never import anything listed here.
"""

from __future__ import annotations

import importlib

from limbo.base.errors import UsageError

EXTRA_MODULES = ("numpy", "pandas", "scipy", "statsmodels", "matplotlib")
NEEDS = {"tables": EXTRA_MODULES[:4], "figures": EXTRA_MODULES, "compare": EXTRA_MODULES[:3]}
"""What each command imports (``tables`` never draws, so it does not pay for matplotlib)."""
INSTALL_HINT = "pip install 'limbo-bench[analysis]'"


def require(command: str) -> None:
    """Import the modules of the extra that ``command`` uses; a :class:`UsageError` naming the
    extra if one fails. Importing (not just finding) catches a half-installed package too."""
    for name in NEEDS.get(command, EXTRA_MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            raise UsageError(f"limbo {command} needs the 'analysis' extra ({name} is not "
                             f"importable): {INSTALL_HINT}") from None
