"""The ``limbo`` command line.

Errors a user can cause print one line naming what to fix and exit 2, without a traceback;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from limbo.commands import check, compare, figures, mcp, report, schema, tables, view
from limbo.config import EPISODE_TIMEOUT_S
from limbo.errors import UsageError

FACTOR_FLAGS = {"model": "models", "harness": "harnesses", "condition": "conditions",
                "contract": "contracts", "fault": "faults", "service": "services",
                "template": "templates"}


def with_params(spec: str, params: list[str]) -> str:
    """``spec`` with ``-M key=value`` parameters appended to its query."""
    for item in params:
        if "=" not in item:
            raise UsageError(f"-M {item!r} must look like key=value")
    if not params:
        return spec
    return spec + ("&" if "?" in spec else "?") + "&".join(params)


def _provider_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-M", "--model-param", action="append", default=[], metavar="KEY=VALUE",
                   help="a model parameter, added to every --model (repeatable)")
    p.add_argument("--cache-dir", type=Path, help="where model responses are cached (default: "
                   "$LIMBO_CACHE_DIR or ~/.cache/limbo/responses)")
    p.add_argument("--no-cache", action="store_true", help="call the model even when cached")
    p.add_argument("--prices", action="append", default=[], type=Path,
                   help="a TOML price file that extends the shipped table (repeatable)")


def _providers(args: argparse.Namespace) -> None:
    """Apply the cache and price options, here and (through the environment) in workers."""
    import os

    from limbo.paths import check_dir
    from limbo.providers import cache, pricing

    if args.no_cache:
        cache.configure(None)
        os.environ.pop(cache.ENV, None)
    else:
        root = args.cache_dir or Path(os.environ.get(cache.ENV) or
                                      Path.home() / ".cache" / "limbo" / "responses")
        if args.cache_dir is not None:
            check_dir(root, "--cache-dir")
        cache.configure(root)
        os.environ[cache.ENV] = str(root)
    for path in args.prices:
        pricing.add_price_file(path)
        os.environ[pricing.ENV] = os.pathsep.join(
            p for p in (os.environ.get(pricing.ENV), str(path)) if p)


class _Parser(argparse.ArgumentParser):
    """argparse, with a mistake reported on one line (and where to find the usage)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="limbo", description="LIMBO: where does exactly-once live?")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="expand and run grids (default: the `default` grid)")
    run.add_argument("grids", nargs="*", default=["default"])
    for flag in FACTOR_FLAGS:
        run.add_argument(f"--{flag}", action="append", metavar=flag.upper(),
                         help=f"replace the grid's {FACTOR_FLAGS[flag]} (repeatable)")
    run.add_argument("--instances", type=int, help="instances per template (replaces the grid's)")
    run.add_argument("--out", type=Path)
    run.add_argument("--concurrency", type=int, default=1)
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--limit", type=int)
    run.add_argument("--shard", type=str)
    run.add_argument("--seed", type=int)
    run.add_argument("--max-cost", type=float)
    run.add_argument("--plugin", action="append", default=[])
    run.add_argument("--dry-run", action="store_true")
    run.add_argument("--episode-timeout", type=float, default=EPISODE_TIMEOUT_S,
                     metavar="S", help="wall-clock limit of one episode, in seconds (default "
                     f"{EPISODE_TIMEOUT_S:g}); an episode past it is recorded as timeout")
    _provider_flags(run)
    run.add_argument("--quiet", action="store_true", help="no progress, summary only")
    check.add_gate_flags(run)
    ep = sub.add_parser("episode", help="run one cell and print its timeline")
    ep.add_argument("--model", default="policy/verify")
    ep.add_argument("--harness", default="minimal")
    ep.add_argument("--condition", default="vanilla")
    ep.add_argument("--contract", default="native")
    ep.add_argument("--fault", default="none")
    ep.add_argument("--template", default="charge_invoice")
    ep.add_argument("--focal-write")
    ep.add_argument("--instance", type=int, default=0)
    ep.add_argument("--seed", type=int, default=0)
    ep.add_argument("--plugin", action="append", default=[])
    ep.add_argument("--json", action="store_true", help="print the record as JSON")
    _provider_flags(ep)
    show = sub.add_parser("show", help="print a stored episode's timeline")
    show.add_argument("run_dir", type=Path, help="a run directory, or an Inspect log of a LIMBO task")
    show.add_argument("episode_id")
    status = sub.add_parser("status", help="integrity of a run directory: cells done, missing, "
                            "quarantined, errored; whether a writer holds it")
    status.add_argument("run_dir", type=Path)
    status.add_argument("--json", action="store_true", help="print the report as JSON")
    ls = sub.add_parser("list", help="what is registered")
    ls.add_argument("what", choices=["services", "faults", "conditions", "harnesses", "models",
                                     "grids", "templates"])
    ls.add_argument("--plugin", action="append", default=[])
    for module in (tables, figures, compare, report, view, check, mcp, schema):
        module.add_parser(sub)
    return p


def _console() -> Any:
    from rich.console import Console

    return Console(width=160) if not sys.stdout.isatty() else Console()


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return int(COMMANDS[args.command](args) or 0)
    except UsageError as exc:
        print(f"limbo: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("limbo: interrupted; re-run the same command to resume", file=sys.stderr)
        return 130


def _one_line(text: str) -> str:
    """An error message as one line, scrubbed of any credential we know of."""
    from limbo.providers.secrets import scrub

    return scrub(" ".join(text.split()))


def _plugins(names: list[str]) -> None:
    from limbo.registry import load_plugin

    for name in names:
        load_plugin(name)


def cmd_run(args: argparse.Namespace) -> int:
    from limbo.commands.run import run

    _plugins(args.plugin)
    _providers(args)
    return run(args, _console())


def cmd_episode(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from limbo.cell import Cell
    from limbo.episode import run_episode
    from limbo.experiments.grid import resolved, validated
    from limbo.tasks import template
    from limbo.timeline import render

    _plugins(args.plugin)
    _providers(args)
    t = template(args.template)
    focal = args.focal_write or t.focal_writes[0]
    if focal not in t.focal_writes:
        raise UsageError(f"--focal-write {focal!r} is not a write of {t.id}; choose from: "
                         f"{', '.join(t.focal_writes)}")
    raw = {"model": with_params(args.model, args.model_param), "harness": args.harness,
           "condition": args.condition, "contract": args.contract, "fault": args.fault,
           "service": t.service, "template": t.id, "instance": args.instance,
           "focal_write": focal, "seed": args.seed}
    resolved(validated({"contracts": [args.contract], "faults": [args.fault],
                        "conditions": [args.condition], "harnesses": [args.harness],
                        "templates": [t.id]}, "command line"))
    try:
        cell = Cell(**raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise UsageError(f"--{'-'.join(map(str, err['loc']))}: {err['msg']}") from None
    from limbo.commands.run import check_models

    check_models([cell.model], None, reach=True)
    _check_fault_applies(cell)
    record = run_episode(cell)
    if args.json:
        print(json.dumps(record, ensure_ascii=False))
    else:
        render(record, _console())
    return 0


def _check_fault_applies(cell: Any) -> None:
    from limbo.registry import lookup
    from limbo.tools import toolset

    op = toolset(cell.contract)[cell.focal_write].op
    if not lookup("fault", cell.fault).applies(op):
        raise UsageError(f"fault {cell.fault} cannot act on {cell.focal_write} (batch writes only)")


def cmd_show(args: argparse.Namespace) -> int:
    from limbo.inspect.log import find, is_inspect_log
    from limbo.store import find_record
    from limbo.timeline import render


    read = find if is_inspect_log(args.run_dir) else find_record
    record = read(args.run_dir, args.episode_id)
    try:
        render(record, _console())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"episode {args.episode_id} in {args.run_dir} is a record LIMBO cannot "
                         f"show ({type(exc).__name__}: {exc}); was it edited by hand?") from None
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from limbo.commands.status import status

    return status(args.run_dir, args.json, _console())


def cmd_list(args: argparse.Namespace) -> int:
    from limbo.commands.listing import listing

    _plugins(args.plugin)
    for line in listing(args.what):
        print(line)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    _plugins(args.plugin)
    return mcp.run(args)


COMMANDS = {"run": cmd_run, "episode": cmd_episode, "show": cmd_show, "list": cmd_list,
            "tables": tables.run, "figures": figures.run, "compare": compare.run,
            "report": report.run, "view": view.run, "check": check.run, "mcp": cmd_mcp,
            "status": cmd_status, "schema": schema.run}


if __name__ == "__main__":
    raise SystemExit(main())
