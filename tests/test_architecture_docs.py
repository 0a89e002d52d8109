"""docs/architecture.md says what is built: every path and module it names exists, its drawing
has the floors of ``tests/test_layers.py`` in their order, and it walks one cell through each."""

from __future__ import annotations

import re

from test_import_graph import MAPPED, ROOT, modules
from test_layers import FLOORS

DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:limbo|services|faults|harnesses|experiments|analysis|tests|docs)"
                  r"/[\w/.]*)`")
DOTTED = re.compile(r"`(limbo(?:\.\w+)+)`")


def named_paths(text: str) -> set[str]:
    """Paths in backticks (``limbo/log/store.py``, ``limbo/run/``), and those the drawing
    lists in its third column."""
    found = set(PATH.findall(text))
    drawing = text.split("```")[1]
    for line in drawing.splitlines():
        found.update(w for w in line.split() if "/" in w and w.endswith((".py", "/")))
    return found


def test_every_path_the_page_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    paths = named_paths(text)
    assert len(paths) > 40 and "limbo/episode/run_one.py" in paths
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_every_module_the_page_names_is_one() -> None:
    known = set(modules(ROOT, MAPPED))
    named = set(DOTTED.findall(DOC.read_text(encoding="utf-8")))
    assert {"limbo.adapter", "limbo.errors", "limbo.episode.condition"} <= named
    assert sorted(named - known) == []


def test_the_drawing_has_the_floors_of_the_layers_check_in_order() -> None:
    drawing = DOC.read_text(encoding="utf-8").split("```")[1]
    # a floor's line, or a second room's under it (continuations are indented further)
    drawn = re.findall(r"^(?:floor +\d+ +| {10})([a-z]+) ", drawing, re.M)
    expected = [room for name, rooms in reversed(FLOORS) for room in _room_names(name, rooms)]
    assert [n for n in drawn if n in expected] == expected


def _room_names(name: str, rooms: list[tuple[str, ...]]) -> list[str]:
    """The names the drawing gives a floor's rooms: the floor's, or on a floor of several
    rooms the last part of each room's package."""
    return [name] if len(rooms) == 1 else [room[0].rpartition(".")[2] for room in rooms]


def test_the_walk_has_one_paragraph_per_floor() -> None:
    walk = DOC.read_text(encoding="utf-8").split("## One cell, floor by floor")[1].split("## ")[0]
    heads = re.findall(r"^\*\*([a-z, ]+) \(floors? [\d, ]+\)\.\*\*", walk, re.M)
    covered = {name.strip() for head in heads for name in head.split(",")}
    floors = {room for name, rooms in FLOORS for room in _room_names(name, rooms)}
    assert floors - {"inspect", "proxy"} == covered  # those two are walked with the run
