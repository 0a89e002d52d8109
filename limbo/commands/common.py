"""Options and helpers several commands share: plugins, model parameters, the response cache
and price files, and the console. Commands import this module, never :mod:`limbo.cli`, so the
parser can import every command without a cycle."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.providers.options import ProviderOptions


def add_plugin_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="a plugin to load first: a module name or a .py file that registers "
                        "services, faults, conditions, policies, harnesses or models (repeatable)")


def load_plugins(args: argparse.Namespace) -> None:
    """Load every ``--plugin`` of the command line."""
    from limbo.base.registry import load_plugin

    for name in args.plugin:
        load_plugin(name)


@functools.cache
def builtin_design() -> dict[str, Any]:
    """The built-in paper grid's design with every model allowed (a run may use ``--model``),
    naming the family of every registered fault mode and the kind of every registered tool
    (plugins included): what the analysis reads input that recorded no design against
    (``load(..., fallback=)``)."""
    from limbo.base.registry import entries
    from limbo.experiments.design import design, log_design
    from limbo.experiments.grid import load_grid
    from limbo.sim.tools import toolset

    found = design(load_grid("paper"))
    for experiment in found["experiments"]:
        experiment["levels"].pop("model")
    every = log_design(entries("fault"), {n: s.kind for n, s in toolset("native").items()})
    found["faults"] = {**every["faults"], **found["faults"]}
    found["tools"] = {**every["tools"], **found["tools"]}
    return found


def with_params(spec: str, params: list[str]) -> str:
    """``spec`` with ``-M key=value`` parameters appended to its query."""
    for item in params:
        if "=" not in item:
            raise UsageError(f"-M {item!r} must look like key=value")
    if not params:
        return spec
    return spec + ("&" if "?" in spec else "?") + "&".join(params)


def add_provider_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-M", "--model-param", action="append", default=[], metavar="KEY=VALUE",
                   help="a model parameter, added to every --model (repeatable)")
    p.add_argument("--cache-dir", type=Path, help="where model responses are cached (default: "
                   "$LIMBO_CACHE_DIR or ~/.cache/limbo/responses)")
    p.add_argument("--no-cache", action="store_true", help="call the model even when cached")
    p.add_argument("--prices", action="append", default=[], type=Path,
                   help="a TOML price file that extends the shipped table (repeatable)")


def provider_options(args: argparse.Namespace) -> ProviderOptions:
    """The cache and price options, read once, here: the cache directory (``None``: no cache)
    and the price files (each read now, so that a bad one is one line before anything runs),
    by absolute path. The command binds them around its own model checks
    (:func:`limbo.providers.options.using`) and hands them to its run's
    :class:`~limbo.run.context.Settings`; nothing is written to the environment or a global."""
    from limbo.commands.paths import check_output
    from limbo.providers import cache, pricing

    root: Path | None = None
    if not args.no_cache:
        root = args.cache_dir or Path(os.environ.get(cache.ENV) or
                                      Path.home() / ".cache" / "limbo" / "responses")
        if args.cache_dir is not None:
            check_output(root, "--cache-dir")
    for path in args.prices:
        pricing.check_price_file(path)
    return ProviderOptions(None if root is None else str(Path(root).resolve()),
                           tuple(str(Path(p).resolve()) for p in args.prices))


def console() -> Any:
    """A rich console: the terminal's width on a terminal, 160 columns into a pipe or file."""
    from rich.console import Console

    return Console(width=160) if not sys.stdout.isatty() else Console()
