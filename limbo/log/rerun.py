"""Re-running one stored episode takes what its run took: the plugins that registered its
model, fault or service, and the price files that priced it. The run's manifest records both,
resolved to absolute paths (``plugins``, ``prices``), so that ``limbo episode --from`` loads
them by itself and every re-run command LIMBO prints names them."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError


def where(plugin: str) -> str:
    """A ``--plugin`` as the manifest records it: a file by its absolute path, a module by
    its name."""
    path = Path(plugin)
    if plugin.endswith(".py") or path.exists():
        return str(path.resolve())
    return plugin


def recorded(run_dir: Path) -> tuple[list[str], list[str]]:
    """The plugins and price files of the runs that wrote ``run_dir`` (every manifest's,
    first seen first). Read once per state of its manifests: a report asks for each of its
    episodes."""
    state = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                  for p in sorted(run_dir.glob("manifest*.json")) if p.is_file())
    return _recorded(str(run_dir), state)


@functools.lru_cache(maxsize=64)
def _recorded(run_dir: str, state: tuple[tuple[str, int, int], ...]) -> tuple[list[str],
                                                                           list[str]]:
    from limbo.log.store import manifests

    plugins: dict[str, None] = {}
    prices: dict[str, None] = {}
    try:
        found = manifests(Path(run_dir))
    except (UsageError, OSError):
        return [], []
    for manifest in found.values():
        plugins.update(dict.fromkeys(_strings(manifest.get("plugins"))))
        prices.update(dict.fromkeys(_strings(manifest.get("prices"))))
    return list(plugins), list(prices)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def rerun_command(run_dir: Path, episode_id: str) -> str:
    """``limbo episode --from RUN_DIR EPISODE_ID``, with the run's plugins and price files."""
    return rerun_commands(run_dir)(episode_id)


def rerun_commands(run_dir: Path) -> Callable[[str], str]:
    """:func:`rerun_command` for any episode of ``run_dir``, its manifests read once (a report
    names the command of every episode)."""
    plugins, prices = recorded(run_dir)
    after: list[str] = []
    for plugin in plugins:
        after += ["--plugin", plugin]
    for price in prices:
        after += ["--prices", price]
    head = shlex.join(["limbo", "episode", "--from", str(run_dir)])
    tail = "".join(f" {shlex.quote(word)}" for word in after)
    return lambda episode_id: f"{head} {shlex.quote(episode_id)}{tail}"
