"""Which loaded episodes are a paper experiment's: what a run *is*, not what its grid is called.

A run records the grid it was made from, but a command line can change everything the paper's
captions fix — ``limbo run e2 --contract keys-everywhere``, ``limbo run e1 --world FILE``,
``--harness``, ``--condition``. So an episode is in experiment X when a run of one of X's grids
holds it (:data:`limbo.analysis.paper.CAPTIONS`), it ran on the built-in services, and each
cell field X's caption fixes has the caption's value, read from the episode's own record. An E2
run under keys everywhere is then E2k's, and a world-file run of E1 is no one's unless
``--world`` chooses that world file: the paper's tables hold one world's population only (the
built-in services by default), and every table says in one line what of its grids'
episodes it left out and why (:func:`left_out`); the summary (Table 0) holds everything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from limbo.analysis.paper import CAPTIONS
from limbo.analysis.runs import BUILT_IN, EXPERIMENT

Mask = np.ndarray


def of_grids(frame: pd.DataFrame, grids: Iterable[str]) -> Mask:
    """Rows a run of any of ``grids`` holds as that grid's."""
    mask = np.zeros(len(frame), dtype=bool)
    for grid in grids:
        column = EXPERIMENT + grid
        if column in frame.columns:
            mask |= frame[column].to_numpy()
    return mask


def population(frame: pd.DataFrame, name: str, world: str = BUILT_IN) -> Mask:
    """Rows of the paper's experiment ``name`` (its grids, its caption, on ``world``: the
    built-in services unless ``limbo tables --world`` chose a world file); for a name that is
    no paper experiment, ``world``'s rows of the grid of that name."""
    grids, fixed = CAPTIONS.get(name, ((name,), {}))
    mask = of_grids(frame, grids)
    if not mask.any():
        return mask
    mask &= (frame["world"] == world).to_numpy()
    for column, levels in fixed.items():
        mask &= frame[column].isin(levels).to_numpy()
    return mask


def left_out(frame: pd.DataFrame, names: Iterable[str], world: str = BUILT_IN) -> list[str]:
    """One line per grid and reason: the episodes runs of the grids of experiments ``names``
    hold that none of those experiments takes (:func:`population`) — a world file, or a
    contract, harness or condition the caption does not have."""
    names = [n for n in names if n in CAPTIONS]
    grids = sorted({g for n in names for g in CAPTIONS[n][0]})
    held = of_grids(frame, grids)
    if not held.any():
        return []
    kept = np.zeros(len(frame), dtype=bool)
    for name in names:
        kept |= population(frame, name, world)
    rows = frame[held & ~kept]
    if rows.empty:
        return []
    counts: Counter[tuple[str, str]] = Counter()
    for grid in grids:
        mine = rows[rows[EXPERIMENT + grid].to_numpy()] if EXPERIMENT + grid in rows else rows[:0]
        for reason, n in _reasons(mine, names, world).items():
            counts[(grid, reason)] += n
    return [f"Left out: {n:,} episode{'s' if n != 1 else ''} of grid {grid} that {reason}; "
            f"Table 0 (the summary) shows every loaded episode." for (grid, reason), n in
            sorted(counts.items())]


def _reasons(rows: pd.DataFrame, names: list[str], chosen: str) -> Counter[str]:
    """Why each of ``rows`` is in none of the experiments ``names``: its world if not the
    ``chosen`` one, else the first cell field whose value no caption of ``names`` allows."""
    allowed: dict[str, set[str]] = {}
    for name in names:
        for column, levels in CAPTIONS[name][1].items():
            allowed.setdefault(column, set()).update(levels)
    fields = [c for c in ("contract", "harness", "condition") if c in allowed]
    found: Counter[str] = Counter()
    sizes = rows.groupby(["world", *fields], observed=True, sort=False).size()
    for key, n in sizes.items():
        world, *values = map(str, key if isinstance(key, tuple) else (key,))
        bad = [(c, v) for c, v in zip(fields, values, strict=True) if v not in allowed[c]]
        if world != chosen:
            found[f"ran on {_world(world)} (these tables hold {_world(chosen)} only; "
                  f"--world {world} tabulates it)"] += int(n)
        elif bad:
            found[f"ran under {bad[0][0]} {bad[0][1]}, which no caption here has"] += int(n)
        else:
            found["is outside every caption here"] += int(n)
    return found


def _world(identity: str) -> str:
    return "the built-in services" if identity == BUILT_IN else f"world file {identity}"


def choose_world(frame: pd.DataFrame, wanted: str) -> str:
    """The loaded world ``limbo tables --world`` names: ``built-in``, a world file's identity
    (``name@digest``), or its name alone when one loaded world file has it."""
    loaded = sorted(map(str, frame["world"].unique())) if len(frame) else []
    if wanted in (BUILT_IN, *loaded):
        return wanted
    named = [w for w in loaded if w.split("@")[0] == wanted]
    if len(named) == 1:
        return named[0]
    choices = ", ".join([BUILT_IN, *(w for w in loaded if w != BUILT_IN)])
    why = "names several loaded world files" if named else "is no world of the loaded runs"
    raise ValueError(f"--world {wanted!r} {why}; choose from {choices}")
