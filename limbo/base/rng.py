"""Per-component random generators derived from one root seed.

Each component (a fault, a policy, the id minting of a service) asks for its own generator by
name. Drawing from one never shifts another's stream, so adding a component or a draw in one
place leaves every other component's numbers unchanged.
"""

from __future__ import annotations

import hashlib
import random
from functools import lru_cache

Rng = random.Random
"""The type of a generator, for annotations. The linter bans ``random.Random`` everywhere but
here: building one elsewhere (unseeded, or seeded ad hoc) would escape the per-component
seeding, and naming the class through this alias keeps annotations legal."""


@lru_cache(maxsize=8192, typed=True)
def derive_seed(root: int | str, name: str) -> int:
    """A 64-bit seed for component ``name`` under ``root``. Memoised (``typed``, so ``1`` and
    ``True`` stay apart): the cells of a paired comparison share their world seed, so each of
    its components' seeds is asked for again by every arm."""
    raw = hashlib.sha256(f"{root}\x1f{name}".encode()).digest()
    return int.from_bytes(raw[:8], "big")


def generator(root: int | str, name: str) -> Rng:
    """A private ``random.Random`` for component ``name`` (never the global one)."""
    return Rng(derive_seed(root, name))
