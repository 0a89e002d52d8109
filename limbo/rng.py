"""Per-component random generators derived from one root seed.

Each component (a fault, a policy, the id minting of a service) asks for its own generator by
name. Drawing from one never shifts another's stream, so adding a component or a draw in one
place leaves every other component's numbers unchanged.
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(root: int | str, name: str) -> int:
    """A 64-bit seed for component ``name`` under ``root``."""
    raw = hashlib.sha256(f"{root}\x1f{name}".encode()).digest()
    return int.from_bytes(raw[:8], "big")


def generator(root: int | str, name: str) -> random.Random:
    """A private ``random.Random`` for component ``name`` (never the global one)."""
    return random.Random(derive_seed(root, name))
