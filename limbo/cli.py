"""The ``limbo`` command line: parse, then dispatch to the command's module.

Each command is one module under :mod:`limbo.commands` with ``add_parser(sub)`` (its flags) and
``run(args)`` (what it does); this module only builds the parser from them and maps the errors
a user can cause to one line and exit 2, without a traceback. Anything else is a bug and keeps
its traceback. Commands never import this module.

Only the module of the command being run is imported: the others are listed by their name and
summary (:data:`limbo.commands.COMMANDS`), so ``limbo --help`` imports no command, and ``limbo
list services`` nothing of the analysis, the providers or the MCP SDK.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from limbo.base.errors import UsageError
from limbo.base.interrupts import from_user, watching
from limbo.commands import COMMANDS


class _Parser(argparse.ArgumentParser):
    """argparse, with a mistake reported on one line (and where to find the usage)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line: one subparser per command, each knowing its handler. Given the
    arguments, only the command they name is built (its module imported); the others are its
    name and summary alone, enough for ``limbo --help`` and for a mistyped name."""
    named = _named(argv) if argv is not None else None
    p = _Parser(prog="limbo", description="LIMBO: where does exactly-once live?")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (module_name, summary) in COMMANDS.items():
        if argv is not None and name != named:
            sub.add_parser(name, help=summary)
            continue
        module = importlib.import_module(f"limbo.commands.{module_name}")
        module.add_parser(sub)
        sub.choices[name].set_defaults(handler=module.run)
    return p


def _named(argv: Sequence[str]) -> str | None:
    """The command the arguments name: the first that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    with watching():
        try:
            given = list(sys.argv[1:] if argv is None else argv)
            args = parser(given).parse_args(given)
            args.argv = given  # for the re-run commands
            return int(args.handler(args) or 0)
        except UsageError as exc:
            print(f"limbo: error: {_one_line(str(exc))}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # the reader went away (`limbo list ... | head`): not an error
            _quiet_stdout()
            return 141
        except KeyboardInterrupt as exc:
            if not from_user():  # raised by some code (a plugin), not a Ctrl-C
                print(f"limbo: error: {_one_line(_not_ctrl_c(exc))}", file=sys.stderr)
                return 2
            resumes = args is not None and args.command == "run"
            print("limbo: interrupted" + ("; re-run the same command to resume" if resumes
                                          else ""), file=sys.stderr)
            return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail a second time."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in a test)
        pass


def _not_ctrl_c(exc: KeyboardInterrupt) -> str:
    from limbo.episode.isolation import where

    return (f"{where(exc)} was raised by code (a plugin?), not by a Ctrl-C; nothing was "
            f"interrupted by you")


def _one_line(text: str) -> str:
    """An error message as one line, scrubbed of any credential we know of."""
    from limbo.base.secrets import scrub

    return scrub(" ".join(text.split()))


if __name__ == "__main__":
    raise SystemExit(main())
