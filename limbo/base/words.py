"""Counts in messages: ``1 cell``, ``2 cells`` — never ``1 cells`` or ``cell(s)``."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1 (``many`` when the plural is not
    ``word + "s"``); thousands are grouped (``70,400 episodes``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
