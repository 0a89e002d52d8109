"""Scripted models for the tests: turns written to a JSON file and played by the registered
``scripted`` provider (:mod:`limbo.providers.scripted`), exactly as a user's script would be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from limbo.episode.models import ModelAdapter, ModelTurn, make_adapter

Call = tuple[str, Any]
Turn = ModelTurn | str | Call | list[Call]
"""A turn: a :class:`ModelTurn`, a text (the model stops), one call ``(tool, arguments)``, or
several calls in one turn."""


def script_turn(turn: Turn) -> dict[str, Any]:
    """``turn`` as the JSON object a script file holds."""
    if isinstance(turn, ModelTurn):
        return turn.model_dump(mode="json")
    if isinstance(turn, str):
        return {"text": turn}
    calls = [turn] if isinstance(turn, tuple) else turn
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


def write_script(path: Path, turns: list[Turn]) -> Path:
    """Write ``turns`` to the script file ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([script_turn(t) for t in turns]), encoding="utf-8")
    return path


def scripted(folder: Path, turns: list[Turn], name: str = "script.json") -> ModelAdapter:
    """A ``scripted/...`` adapter playing ``turns`` (written to ``folder/name``)."""
    return make_adapter(f"scripted/{write_script(folder / name, turns)}")
