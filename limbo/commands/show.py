"""``limbo show RUN_DIR EPISODE_ID``: print one stored episode's timeline."""

from __future__ import annotations

import argparse
from pathlib import Path

from limbo.base.errors import UsageError
from limbo.commands import command_parser
from limbo.commands.common import console
from limbo.log.records import EpisodeRecord


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``limbo show`` on the CLI's subparsers."""
    p = command_parser(sub, "show")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                   help="a run directory, or an Inspect log of a LIMBO task")
    p.add_argument("episode_id", metavar="EPISODE_ID", help="the episode's id (ep-...)")


def stored_record(run_dir: Path, episode_id: str) -> EpisodeRecord:
    """The record of ``episode_id`` in a run directory; a :class:`UsageError` saying whether
    the directory is missing, holds no records, or lacks that episode."""
    from limbo.log.store import find_record, record_files

    if not run_dir.is_dir():
        raise UsageError(f"no run directory {run_dir}")
    if not record_files(run_dir):
        raise UsageError(f"{run_dir} holds no episode records (no episodes*.jsonl); name the "
                         f"directory `limbo run --out` wrote")
    return find_record(run_dir, episode_id)


def run(args: argparse.Namespace) -> int:
    from limbo.episode.timeline import render
    from limbo.log.inspect_logs import find, is_inspect_log

    read = find if is_inspect_log(args.run_dir) else stored_record
    record = read(args.run_dir, args.episode_id)
    try:
        render(record, console())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"episode {args.episode_id} in {args.run_dir} is a record LIMBO cannot "
                         f"show ({type(exc).__name__}: {exc}); was it edited by hand?") from None
    return 0
