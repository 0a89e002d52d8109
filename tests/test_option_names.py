"""One concept, one flag, across ``limbo run``, ``episode``, ``mcp`` and ``proxy``: the task
template is ``--template``, a world is ``--world FILE_OR_DIR``, and wall seconds per second of
sandbox time is ``--time-scale F`` (in the two commands that wait in wall time). An old
spelling is hidden from ``--help``, still works for one release with the new flag's meaning,
and says so in one line on stderr (stdout stays the protocol's)."""

from __future__ import annotations

import argparse

import pytest

from limbo.cli import main, parser
from limbo.commands.renamed import OldName

COMMANDS = ("run", "episode", "mcp", "proxy")
OLD = {"proxy": ["--task"], "mcp": ["--hold-timeouts"]}


def _flags(command: str) -> dict[str, argparse.Action]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {s: a for a in sub.choices[command]._actions for s in a.option_strings}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_concept_is_one_flag_in_every_command(command: str) -> None:
    flags = _flags(command)
    shown = {s for s, a in flags.items() if not isinstance(a, OldName)}
    assert "--template" in shown
    assert flags["--world"].metavar == "FILE_OR_DIR"
    if command in ("mcp", "proxy"):
        assert flags["--time-scale"].metavar == "F" and flags["--time-scale"].type is float
    assert shown & {"--task", "--hold-timeouts", "--world-file", "--scale"} == set()
    assert sorted(s for s, a in flags.items() if isinstance(a, OldName)) == OLD.get(command, [])


@pytest.mark.parametrize(("argv", "new", "dest", "value", "note"), [
    (["proxy", "--world", "w.toml", "--task", "orders_place"],
     ["proxy", "--world", "w.toml", "--template", "orders_place"], "task", "orders_place",
     "limbo: note: --task is now --template; the old name goes in the next release"),
    (["mcp", "--hold-timeouts", "45"], ["mcp", "--time-scale", "1.5"], "time_scale", 1.5,
     "limbo: note: --hold-timeouts 45 is now --time-scale 1.5 (F = S / the sandbox's 30 s "
     "client timeout); the old name goes in the next release"),
])
def test_an_old_spelling_works_for_one_release_and_says_so_once(
        capsys: pytest.CaptureFixture[str], argv: list[str], new: list[str], dest: str,
        value: object, note: str) -> None:
    assert getattr(parser().parse_args(argv), dest) == value
    out, err = capsys.readouterr()
    assert out == "" and err == note + "\n"
    assert getattr(parser().parse_args(new), dest) == value
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("command", COMMANDS)
def test_old_spellings_are_not_in_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    assert "--template" in text and "FILE_OR_DIR" in text
    assert not [old for olds in OLD.values() for old in olds if old in text]


def test_the_defaults_are_unchanged_without_the_flags() -> None:
    assert parser().parse_args(["mcp"]).time_scale == 0.0
    proxy = parser().parse_args(["proxy", "--world", "w.toml"])
    assert proxy.task is None and proxy.time_scale == 1.0
