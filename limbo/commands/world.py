"""``limbo world``: check a world file, or print the JSON Schema of the format.

``limbo world check FILE_OR_DIR`` prints one line per problem, ``file:line: key.path: what is
wrong``, and exits 1 when there is any; a world that passes the rules is then tried (each
template's plan, followed with no fault, must succeed: :mod:`limbo.episode.world_trial`) and,
when it does, summarised in one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from limbo.commands import command_parser


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "world")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="{check,schema}",
                             help="what to do: check a world file, or print the format's "
                                  "JSON Schema")
    check = verbs.add_parser("check", help="check a world file or directory: one line per "
                                           "problem, with its file and line")
    check.add_argument("path", type=Path, metavar="FILE_OR_DIR",
                       help="a world file (.toml), or a directory whose .toml files make one "
                            "world")
    verbs.add_parser("schema", help="print the JSON Schema of the world-file format")


def run(args: argparse.Namespace) -> int:
    if args.verb == "schema":
        from limbo.sim.worldfile.format import schema_text

        print(schema_text(), end="")
        return 0
    return _check(args.path)


def _check(path: Path) -> int:
    from limbo.episode.world_trial import trial_problems
    from limbo.sim.worldfile.check import check, describe
    from limbo.sim.worldfile.kit import load_world

    world, source = check(path)
    problems = source.problems if world is None else trial_problems(load_world(path), path)
    if problems:
        for problem in problems:
            print(problem)
        n = len(problems)
        print(f"{path}: {n} problem{'s' if n != 1 else ''}")
        return 1
    assert world is not None
    print(f"{path}: ok — {describe(world)}")
    return 0
