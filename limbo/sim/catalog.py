"""A table of the registered fault modes, for the CLI (``limbo list faults``) and the docs."""

from __future__ import annotations

from dataclasses import dataclass

from limbo.base.registry import entries
from limbo.sim.fault import Family, Group


@dataclass(frozen=True)
class ModeInfo:
    """What a table or a listing needs to know about one mode."""

    family: Family
    families: tuple[Family, ...]
    group: Group | None
    sees: str
    hidden: str
    batch_only: bool


def catalog() -> dict[str, ModeInfo]:
    """Every registered mode (built-ins and plugins), sorted by name."""
    return {name: ModeInfo(cls.family, tuple(cls.families), cls.group, cls.sees, cls.hidden,
                           cls.batch_only)
            for name, cls in entries("fault").items()}


def group_members() -> dict[str, list[str]]:
    """Observation-equivalence group -> its modes (sorted)."""
    out: dict[str, list[str]] = {}
    for name, info in catalog().items():
        if info.group is not None:
            out.setdefault(info.group, []).append(name)
    return out
