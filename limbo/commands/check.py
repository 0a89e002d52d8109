"""``limbo check``: the CI gate. Exits 1 when a threshold is crossed, 0 when every check
holds, 2 on a usage error; writes JUnit XML with ``--junit``.

``limbo run`` takes the same flags (:func:`add_gate_flags`), checks them before it runs anything
(:func:`gate_options`), and gates the run directories it wrote (:func:`gate_runs`), so one
command both runs and gates. The rules are in :mod:`limbo.analysis.gate`; logs are read by the
one loader every table uses, so Inspect logs can be gated too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.commands import command_parser
from limbo.commands.common import add_plugin_flag, builtin_design

EXIT_FAILED = 1


def add_gate_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-dup", metavar="RATE",
                   help="fail when an arm's duplicate rate in a fault family exceeds RATE (0-1)")
    p.add_argument("--min-eos", metavar="RATE",
                   help="fail when an arm's exactly-once rate in a fault family is below RATE")
    p.add_argument("--family", action="append", default=[], metavar="FAMILY",
                   help="gate only this fault family, e.g. read-back-resolves (repeatable; "
                        "default: every family in the logs)")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write the verdict as JUnit XML")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command_parser(sub, "check")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories, episodes*.jsonl files or Inspect logs (any mix)")
    add_gate_flags(p)
    add_plugin_flag(p)


def gate_options(args: argparse.Namespace) -> Any:
    """The thresholds of the command line (a ``Thresholds``), or ``None`` when no gate flag
    was given; a :class:`UsageError` for a bad one. Needs the ``analysis`` extra only when a
    gate is asked for."""
    asked = args.max_dup is not None or args.min_eos is not None
    if args.junit is not None:
        from limbo.commands.paths import check_output

        check_output(args.junit, "--junit", file=True)
    if not asked:
        if args.family or args.junit:
            raise UsageError("--family and --junit need a threshold: --max-dup RATE and/or "
                             "--min-eos RATE")
        return None
    from limbo.analysis.deps import require

    require("check")
    from limbo.analysis.gate import Thresholds, families, rate_value
    from limbo.sim.fault import FAMILIES

    return Thresholds(
        max_dup=None if args.max_dup is None else rate_value("--max-dup", args.max_dup),
        min_eos=None if args.min_eos is None else rate_value("--min-eos", args.min_eos),
        families=tuple(families(args.family, FAMILIES)))


SHOWN = 5
"""Failing episodes printed per check; the JUnit file lists them all."""


def _more(count: int, what: str, junit: Path | None, out: Any) -> None:
    if count > SHOWN:
        where = f"listed in {junit}" if junit else "add --junit FILE to list them all"
        print(f"       ... and {count - SHOWN} more {what} ({where})", file=out)


def gate_runs(runs: list[Path], thresholds: Any, junit: Path | None, out: Any = None) -> int:
    """Gate the episodes of ``runs``; print one line per check and write the JUnit file.
    The exit code: 0 when every check holds, 1 otherwise."""
    from limbo.analysis import junit as junit_xml
    from limbo.analysis.gate import evaluate
    from limbo.analysis.loader import load

    out = out or sys.stdout
    loaded = load(runs, builtin_design)
    for line in loaded.messages():
        print(f"limbo: warning: {line}", file=sys.stderr)
    verdict = evaluate(loaded, thresholds)
    for check in verdict.checks:
        mark = "FAIL" if check.failed else "ok  "
        print(f"{mark} {check.name} [{check.arm}]: {check.message}", file=out)
        for episode in check.episodes[:SHOWN]:
            print(f"       {episode.why}: {episode.show}", file=out)
        _more(len(check.episodes), "failing episodes", junit, out)
    errors = {e.episode_id: e for e in verdict.errors}
    for episode in list(errors.values())[:SHOWN]:
        print(f"ERR  {episode.episode_id} ended in {episode.why}: {episode.show}", file=out)
    _more(len(errors), "errored episodes", junit, out)
    if junit is not None:
        try:
            junit_xml.write(verdict, junit)
        except OSError as exc:
            raise UsageError(f"cannot write --junit {junit}: {exc.strerror or exc}") from None
    failed = sum(c.failed for c in verdict.checks)
    print(f"limbo check: {'passed' if verdict.passed else 'FAILED'}: {failed} of "
          f"{len(verdict.checks)} checks failed, {len(verdict.failing_episodes())} failing "
          f"episodes, {verdict.rated} rated, {len(errors)} errored"
          + (f"; JUnit in {junit}" if junit else ""),
          file=out)
    return 0 if verdict.passed else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from limbo.base.registry import load_plugin

    for name in args.plugin:
        load_plugin(name)
    thresholds = gate_options(args)
    if thresholds is None:
        raise UsageError("name a threshold to check: --max-dup RATE and/or --min-eos RATE")
    return gate_runs(args.runs, thresholds, args.junit)
