"""Values computed once per object and reused by every episode of a process.

A reference-policy grid runs tens of thousands of episodes over a handful of templates,
conditions and timing settings, and rebuilding what only depends on those (a plan's hash, an
instance's variables) cost each episode more than some of its tool calls. What is memoised here
is a pure function of an object that is never modified (frozen models, the cached templates), so
a cached value is the value the episode would have computed; callers copy what they may change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

LIMIT = 4096
"""Objects remembered per memo; past it the memo starts afresh (a bound, not a tuning knob)."""


def per_object(fn: Callable[[T], R]) -> Callable[[T], R]:
    """``fn`` memoised by the identity of its argument, for objects that are not hashable by
    value (a template holds dicts). The memo keeps the object itself, so its id is never reused
    by another object while the entry lives."""
    table: dict[int, tuple[T, R]] = {}

    def memoised(obj: T) -> R:
        hit = table.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if len(table) >= LIMIT:
            table.clear()
        value = fn(obj)
        table[id(obj)] = (obj, value)
        return value

    return memoised
