"""What a run will do, fixed before anything is written: the grid's identity and this shard's
cells.

The identity of a grid is a fingerprint of the set of its cells' episode ids (ids digest the
whole cell, seed included), so two spellings of one grid — levels in another order, a
repeated level, a grid file that lists what a built-in grid lists — have one identity, and any
grid that would run a different cell has another. It is computed in one streaming pass, adding
up per-id digests (order does not matter, and nothing is kept but the ids of this shard).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limbo.base.hashing import digest

if TYPE_CHECKING:  # ``limbo status`` takes ``in_shard`` without the cell's pydantic model
    from limbo.sim.cell import Cell

_MOD = 2**128


def in_shard(episode_id: str, shard: tuple[int, int] | None) -> bool:
    """Deterministic partition of cells over ``N`` shards by their id."""
    if shard is None:
        return True
    index, count = shard
    return int(digest(episode_id, 8), 16) % count == index - 1


@dataclass(frozen=True)
class Plan:
    fingerprint: str
    """Identity of the grid: its cell count and a digest of the set of its episode ids."""
    total: int
    """Cells of the grid (all shards)."""
    mine: tuple[str, ...]
    """Episode ids of this shard's cells, in expansion order."""


def plan(cells: Iterable[Cell], shard: tuple[int, int] | None) -> Plan:
    """One pass over ``cells``: the grid's fingerprint, its size, and this shard's ids."""
    acc, total, mine = 0, 0, []
    for cell in cells:
        episode = cell.episode_id
        acc = (acc + int.from_bytes(hashlib.sha256(episode.encode()).digest()[:16], "big")) % _MOD
        total += 1
        if in_shard(episode, shard):
            mine.append(episode)
    return Plan(f"{total}-{acc:032x}", total, tuple(mine))
