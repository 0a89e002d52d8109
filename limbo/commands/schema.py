"""``limbo schema``: the JSON Schema of the episode record, as published in docs/records.md.

Printed from the record models (:mod:`limbo.log.records`), so it always matches what this LIMBO
writes and reads; ``--part event`` prints the schema of one event (the discriminated union on
``type``), for tools that stream events.
"""

from __future__ import annotations

import argparse

from limbo.commands import command_parser
from limbo.log.records import schema_text


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "schema")
    p.add_argument("--part", choices=("record", "event"), default="record",
                   help="the whole record (default), or one event of its event log")


def run(args: argparse.Namespace) -> int:
    print(schema_text(args.part))
    return 0
