"""Old spellings of flags, kept for one release after a rename.

``limbo run``, ``episode``, ``mcp`` and ``proxy`` spell one concept one way: ``--template`` for
the task template, ``--time-scale F`` for wall seconds per second of sandbox time, ``--world
FILE_OR_DIR`` for a world. A spelling they used before still works for one release: it is
hidden from ``--help``, stores into the new flag's destination (converted where the unit
changed), and says so in one line on stderr — never on stdout, which ``limbo mcp`` and
``limbo proxy`` keep for the protocol.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

UNTIL = "the next release"


class OldName(argparse.Action):
    """A flag's old spelling: hidden, storing into the new flag's destination."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str,
                 convert: Callable[[Any], Any] | None = None,
                 told: Callable[[Any], str] | None = None, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                         **kwargs)
        self.new, self.convert, self.told = new, convert, told

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        old = f"{option_string} {values:g}" if self.told else option_string
        said = self.told(values) if self.told else self.new
        print(f"limbo: note: {old} is now {said}; the old name goes in {UNTIL}", file=sys.stderr)
        setattr(namespace, self.dest, self.convert(values) if self.convert else values)


def add_old_name(p: argparse.ArgumentParser | Any, old: str, new: argparse.Action,
                 **kwargs: Any) -> None:
    """Accept ``old`` for one release as the flag ``new`` (``kwargs``: ``type``, and
    ``convert`` with ``told`` — the new flag's value, said — when the old flag took a number in
    another unit)."""
    p.add_argument(old, dest=new.dest, action=OldName, new=new.option_strings[0],
                   metavar=new.metavar, **kwargs)
