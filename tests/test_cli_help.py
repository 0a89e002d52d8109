"""Every command and every flag of the command line says what it is for in ``--help``."""

from __future__ import annotations

import argparse

import pytest

from limbo.cli import main, parser
from limbo.commands.renamed import OldName


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_command_has_a_help_line() -> None:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: (c.help or "").strip() for c in sub._choices_actions}
    assert set(helps) == set(_subcommands()) and len(helps) >= 12
    assert [name for name, text in helps.items() if not text] == []


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_flag_of_every_command_has_a_help_line(command: str) -> None:
    """Only a flag's old spelling, kept for one release, is hidden — and it stands for a
    flag that is shown."""
    actions = [a for a in _subcommands()[command]._actions
               if not isinstance(a, argparse._HelpAction)]
    assert actions
    old = [a for a in actions if isinstance(a, OldName)]
    missing = [a.option_strings or [a.dest] for a in actions if a not in old
               and (not (a.help or "").strip() or a.help == argparse.SUPPRESS)]
    assert missing == []
    shown = {s: a for a in actions if a not in old for s in a.option_strings}
    assert [a.new for a in old if a.new not in shown or shown[a.new].dest != a.dest] == []


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_help_prints_and_exits_zero(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert f"usage: limbo {command}" in capsys.readouterr().out
