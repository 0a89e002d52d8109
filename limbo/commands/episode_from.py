"""``limbo episode --from RUN_DIR EPISODE_ID``: re-run one stored cell as its run ran it, and
say whether the record came out the same.

The cell is the stored record's, with the timing and limits of the grid that ran it (from the
run's manifest), checked to hash to the stored id before anything runs; the model is reached
as the run reached it (the manifest's ``transport``; ``-M`` may change only those parameters,
e.g. a server that moved) with the run's plugins and price files (the manifest's ``plugins``
and ``prices``, loaded without being named again). After the episode, one line says
``reproduced`` — the new record equals the stored one but for ``runtime`` — or where the two
first differ: a reference policy reproduces exactly; a real model usually does not, which is
not an error (exit 0 either way).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.commands.world_change import on_disk, refuse
from limbo.log.records import EpisodeRecord
from limbo.sim.transport import TRANSPORT_PARAMS

CELL_FLAGS = ("model", "harness", "condition", "contract", "fault", "template", "focal_write",
              "instance", "seed", "world")
"""The flags that pick a cell; ``--from`` takes the whole cell from the record instead."""


def adopt_run_options(args: argparse.Namespace) -> None:
    """Add the run's plugins and price files to those given on the command line."""
    from limbo.log.rerun import recorded

    plugins, prices = recorded(Path(args.source[0]))
    args.plugin = list(dict.fromkeys([*args.plugin, *plugins]))
    given = {str(p.resolve()) for p in args.prices}
    args.prices = [*args.prices, *(Path(p) for p in prices if p not in given)]


def stored_cell(args: argparse.Namespace) -> Any:
    """The cell of the stored episode ``--from`` names, rebuilt with the timing and limits
    under which it hashes to its id."""
    from limbo.commands.show import stored_record

    given = [f"--{n.replace('_', '-')}" for n in CELL_FLAGS if getattr(args, n) not in (None, [])]
    if given:
        raise UsageError(f"--from re-runs the stored cell as it was; drop {', '.join(given)}")
    moved = _transport_flags(args.model_param)
    run_dir, episode_id = Path(args.source[0]), args.source[1]
    record = stored_record(run_dir, episode_id)
    where = f"episode {episode_id} in {run_dir}"
    settings, problem = _settings(run_dir)
    for timing, limits in settings:
        for world in _worlds(run_dir):
            cell = build_cell({**record["cell"], "timing": timing, "limits": limits,
                               "world": world}, lambda loc: f"{where}: cell.{loc}")
            if cell.episode_id == episode_id:
                return cell.model_copy(update={"transport": tuple(sorted(
                    {**_recorded_transport(run_dir, cell.model), **moved}.items()))})
    refuse(f"{where} cannot be re-run", on_disk(run_dir))
    if problem is not None:
        raise UsageError(f"{where}: cannot recover the timing and limits of its grid "
                         f"({problem}); run from the directory the run started in")
    raise UsageError(f"{where}: its cell does not hash to its id under the timing and limits "
                     f"of the run's grid; was the record or the manifest edited by hand?")


def _worlds(run_dir: Path) -> list[str | None]:
    """The worlds a cell of ``run_dir`` may have run in: the built-in one, and each world file
    its manifests name, loaded from where the run found it (an edited file is another world,
    whose cells hash to other ids)."""
    from limbo.log.store import manifests
    from limbo.sim.worldfile.kit import load_world

    found: list[str | None] = [None]
    for manifest in manifests(run_dir).values():
        for world in manifest.get("worlds") or ():
            path = world.get("path") if isinstance(world, dict) else None
            if isinstance(path, str) and Path(path).exists():
                try:
                    found.append(load_world(path).identity)
                except UsageError:  # a file that no longer checks: say first if it changed
                    refuse(f"the worlds of {run_dir} cannot be loaded", on_disk(run_dir))
                    raise
    return list(dict.fromkeys(found))


def _settings(run_dir: Path) -> tuple[list[tuple[Any, Any]], str | None]:
    """The (timing, limits) pairs a cell of ``run_dir`` may have run under — the defaults, and
    those of each manifest's grid and of the grids it includes — and why a grid could not be
    loaded, if one could not (an include named by a relative path, say)."""
    from limbo.experiments.grid import Grid, included, validated
    from limbo.log.store import manifests

    found: list[tuple[Any, Any]] = [(None, None)]
    problem = None
    for name, manifest in manifests(run_dir).items():
        raw = manifest.get("grid")
        if not isinstance(raw, dict):
            continue
        try:
            grid = validated(raw, f"{run_dir / name}")
            grids: list[Grid] = [grid, *included(grid)]
        except UsageError as exc:
            problem = problem or str(exc)
            continue
        found += [(g.timing, g.limits) for g in grids]
    return found, problem


def _transport_flags(params: list[str]) -> dict[str, Any]:
    """``-M`` given with ``--from``: only how to reach the model may change."""
    from limbo.sim.transport import split_transport

    if not params:
        return {}
    for item in params:
        name = item.partition("=")[0]
        if name not in TRANSPORT_PARAMS:
            raise UsageError(f"-M {item!r}: with --from only how the model is reached may "
                             f"change ({', '.join(TRANSPORT_PARAMS)}); the rest is the cell's")
    return dict(split_transport("x/x?" + "&".join(params))[1])


def _recorded_transport(run_dir: Path, model: str) -> dict[str, Any]:
    from limbo.log.store import manifests

    found: dict[str, Any] = {}
    for manifest in manifests(run_dir).values():
        table = manifest.get("transport")
        if isinstance(table, dict) and isinstance(table.get(model), dict):
            found.update(table[model])
    return found


def verdict(args: argparse.Namespace, record: EpisodeRecord) -> str:
    """``reproduced``, or where the new record first differs from the stored one."""
    from limbo.base.secrets import scrubber
    from limbo.commands.show import stored_record
    from limbo.log.reader import Skip, decode
    from limbo.log.store import encode
    from limbo.providers.replay import first_difference

    run_dir, episode_id = Path(args.source[0]), args.source[1]
    old = {k: v for k, v in stored_record(run_dir, episode_id).items() if k != "runtime"}
    written = decode(encode(record, scrubber()))  # the record as it would read back
    if isinstance(written, Skip):
        return f"diverged: the new record would not read back ({written.reason})"
    new = {k: v for k, v in written.items() if k != "runtime"}
    path = first_difference(old, new)
    if path is None:
        return (f"reproduced: the record of {episode_id} is identical to the one in {run_dir} "
                f"(runtime aside)")
    return (f"diverged from the record in {run_dir} first at {path}: stored "
            f"{_short(_at(old, path))}, now {_short(_at(new, path))}")


def _at(value: Any, path: str) -> Any:
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        try:
            value = value[int(index)] if index else value[key]
        except (KeyError, IndexError, TypeError):
            return "(absent)"
    return value


def _short(value: Any, limit: int = 120) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def build_cell(raw: dict[str, Any], name: Callable[[str], str]) -> Any:
    """``raw`` as a :class:`~limbo.sim.cell.Cell`; a one-line error naming the bad field (as
    ``name`` spells a field's location for the user)."""
    from pydantic import ValidationError

    from limbo.sim.cell import Cell

    try:
        return Cell.model_validate({k: v for k, v in raw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        raise UsageError(f"{name('.'.join(map(str, err['loc'])))}: {err['msg']}") from None
