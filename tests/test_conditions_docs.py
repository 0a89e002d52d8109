"""docs/conditions.md: its guard example runs as written, and it documents every condition."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from limbo.base.registry import entries

DOC = Path(__file__).resolve().parents[1] / "docs" / "conditions.md"


def example_source() -> str:
    section = DOC.read_text().split("### The guard as a library", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/conditions.md has no python example under 'The guard as a library'"
    return match.group(1)


def test_the_guard_example_runs(capsys: Any) -> None:
    namespace: dict[str, Any] = {"__name__": "guard_example"}
    exec(compile(example_source(), str(DOC), "exec"), namespace)  # our own documentation
    assert len(namespace["charges"]) == 1 and len(namespace["outbox"]) == 1
    assert "authorised" in capsys.readouterr().out


def test_every_condition_is_documented_with_its_kind() -> None:
    text = DOC.read_text()
    for name, cls in entries("condition").items():
        if name.startswith("wait-"):
            assert "`wait-0` … `wait-3600`" in text
            continue
        assert re.search(rf"^\| `{re.escape(name)}` \| {cls.kind} \|", text, re.M), name
