"""One module per ``limbo`` command: ``add_parser(sub)`` declares its flags (each with a help
line) and ``run(args)`` does it. :mod:`limbo.cli` only builds the parser from these modules and
dispatches; options several commands share are in :mod:`limbo.commands.common`.

Each command's name, module and one-line summary are here, in :data:`COMMANDS`, so that ``limbo
--help`` lists the commands without importing any command module, and a command imports only
its own.
"""

from __future__ import annotations

import argparse
from typing import Any

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "expand and run grids (default: the `default` grid)"),
    "episode": ("episode", "run one cell (given by flags, or a stored one with --from) and print "
                           "its timeline"),
    "show": ("show", "print a stored episode's timeline"),
    "status": ("status", "integrity of a run directory: cells done, missing, quarantined, "
                         "errored; whether a writer holds it"),
    "list": ("listing", "what is registered (plugins included), or a run's episodes: limbo list "
                        "episodes RUN_DIR"),
    "tables": ("tables", "regenerate the paper's tables from episode logs"),
    "figures": ("figures", "regenerate the paper's figures from episode logs"),
    "compare": ("compare", "paired differences between two runs (or two levels of a factor) per "
                           "fault family, tested with the world as the unit"),
    "report": ("report", "write an HTML report (tables, figures, every episode) that opens from "
                         "disk"),
    "view": ("view", "serve the HTML report on 127.0.0.1; new episodes of a run still being "
                     "written appear without a restart"),
    "check": ("check", "CI gate: exit 1 when a duplicate or EOS threshold is crossed; JUnit XML "
                       "with --junit"),
    "mcp": ("mcp", "serve one episode as an MCP server for any MCP client"),
    "proxy": ("proxy", "put the faults and the effect ledger in front of your own MCP server, for"
                       " any MCP client"),
    "conform": ("conform", "check an MCP server's exactly-once promises (keys, replays, "
                           "annotations): a verdict per tool and property, no agent"),
    "schema": ("schema", "print the JSON Schema of the episode record"),
    "world": ("world", "check a world file (your own API as a LIMBO world)"),
}
"""Every command, in the order ``limbo --help`` lists them: (its module in
:mod:`limbo.commands`, its one-line summary)."""


def command_parser(sub: argparse._SubParsersAction[Any], name: str,
                   **kwargs: Any) -> argparse.ArgumentParser:
    """Command ``name``'s parser on the CLI's subparsers, its summary the help line."""
    found: argparse.ArgumentParser = sub.add_parser(name, help=COMMANDS[name][1], **kwargs)
    return found
