"""Counts and durations in messages: ``1 cell``, ``2 cells`` — never ``1 cells`` or
``cell(s)`` — and ``40 s``, ``12 min``, ``1.5 h``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1 (``many`` when the plural is not
    ``word + "s"``); thousands are grouped (``70,400 episodes``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def duration(seconds: float) -> str:
    """Seconds as a person reads them: ``40 s``, ``12 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
