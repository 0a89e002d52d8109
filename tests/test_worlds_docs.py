"""docs/worlds.md is true: its commands run as written (a world's E1, E2 and E2k runs and
Tables 3, 5 and 13 from them), its `limbo world check` outputs are what the command prints, the
identity it shows is the example's, and its field tables name every field of the format."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from support.hostile import LIMBO

from limbo.sim.worldfile import format as fmt
from limbo.sim.worldfile.kit import load_world

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "worlds.md").read_text(encoding="utf-8")


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC, re.S)


def limbo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_the_quick_start_runs_and_gives_tables_3_5_and_13(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (commands,) = blocks("sh")
    lines = [line for line in commands.splitlines() if line.strip()]
    assert len(lines) == 5
    outputs = []
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "limbo"
        done = limbo(*argv[1:], cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    assert outputs[0] == blocks("text")[0]  # the check's line, as the page shows it
    tables = outputs[-1]
    for number in (3, 5, 13):
        section = tables.split(f"### Table {number}:")[1].split("###")[0]
        assert "No data" not in section
        assert re.search(r"^\| (policy/blind|native) \|", section, re.M), number


def test_the_broken_file_gives_the_lines_shown(tmp_path: Path) -> None:
    toml = [b for b in blocks("toml") if b.startswith("[world]\nname = \"pay\"")]
    (text,) = toml
    (tmp_path / "pay.toml").write_text(text, encoding="utf-8")
    done = limbo("world", "check", "pay.toml", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == blocks("text")[1]


def test_the_worked_example_quotes_the_shop_file() -> None:
    shop = (ROOT / "examples" / "worlds" / "shop.toml").read_text(encoding="utf-8")
    quoted = [b for b in blocks("toml") if b.startswith("[services.shop.writes.create_order]")]
    assert len(quoted) == 1 and quoted[0] in shop


def test_the_identity_shown_is_the_shop_s() -> None:
    shown = re.findall(r"`(shop@[0-9a-f]+)`", DOC)
    assert shown == [load_world(ROOT / "examples" / "worlds" / "shop.toml").identity]


def _tables() -> str:
    return "\n".join(line for line in DOC.splitlines() if line.startswith("| `"))


@pytest.mark.parametrize("model", [fmt.Arg, fmt.Write, fmt.Read, fmt.ServiceDef,
                                   fmt.TemplateDef])
def test_every_field_of_the_format_is_in_a_table(model: type) -> None:
    rows = _tables()
    missing = [name for name in model.model_fields if f"`{name}`" not in rows]
    assert missing == []
