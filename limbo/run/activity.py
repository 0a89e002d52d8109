"""What a run has in flight outside this process, for the progress line.

The progress line reads this process's own limiters (:func:`limbo.providers.limiter.progress_note`).
An executor whose episodes run elsewhere — on a Ray cluster — says here instead what it has out:
nodes, cells in flight, the shared limiter's calls. Plain process state, like the limiters.
"""

from __future__ import annotations

_notes: dict[str, str] = {}


def say(topic: str, text: str | None) -> None:
    """Set (or, with ``None``, clear) the note of ``topic``."""
    if text is None:
        _notes.pop(topic, None)
    else:
        _notes[topic] = text


def note() -> str | None:
    """Every current note, in the order their topics were first said; ``None`` if none."""
    return "  ".join(_notes.values()) or None
