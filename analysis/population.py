"""Which loaded episodes are a paper experiment's: what a run *is*, not what its grid is called.

A run records the grid it was made from, but a command line can change everything the paper's
captions fix — ``limbo run e2 --contract keys-everywhere``, ``limbo run e1 --world FILE``,
``--harness``, ``--condition``. So an episode is in experiment X when a run of one of X's grids
holds it (:data:`limbo.analysis.paper.CAPTIONS`), it ran on the built-in services, and each
cell field X's caption fixes has the caption's value, read from the episode's own record. An E2
run under keys everywhere is then E2k's, and a world-file run of E1 is no one's: the paper's
tables hold the paper's population only, and every table says in one line what of its grids'
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


def population(frame: pd.DataFrame, name: str) -> Mask:
    """Rows of the paper's experiment ``name`` (its grids, its caption, built-in services);
    for a name that is no paper experiment, the built-in world's rows of the grid of that
    name."""
    grids, fixed = CAPTIONS.get(name, ((name,), {}))
    mask = of_grids(frame, grids)
    if not mask.any():
        return mask
    mask &= (frame["world"] == BUILT_IN).to_numpy()
    for column, levels in fixed.items():
        mask &= frame[column].isin(levels).to_numpy()
    return mask


def left_out(frame: pd.DataFrame, names: Iterable[str]) -> list[str]:
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
        kept |= population(frame, name)
    rows = frame[held & ~kept]
    if rows.empty:
        return []
    counts: Counter[tuple[str, str]] = Counter()
    for grid in grids:
        mine = rows[rows[EXPERIMENT + grid].to_numpy()] if EXPERIMENT + grid in rows else rows[:0]
        for reason, n in _reasons(mine, names).items():
            counts[(grid, reason)] += n
    return [f"Left out: {n:,} episode{'s' if n != 1 else ''} of grid {grid} that {reason}; "
            f"Table 0 (the summary) shows every loaded episode." for (grid, reason), n in
            sorted(counts.items())]


def _reasons(rows: pd.DataFrame, names: list[str]) -> Counter[str]:
    """Why each of ``rows`` is in none of the experiments ``names``: its world if not built-in,
    else the first cell field whose value no caption of ``names`` allows."""
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
        if world != BUILT_IN:
            found[f"ran on world file {world} (these tables hold the built-in services "
                  f"only)"] += int(n)
        elif bad:
            found[f"ran under {bad[0][0]} {bad[0][1]}, which no caption here has"] += int(n)
        else:
            found["is outside every caption here"] += int(n)
    return found
