"""What a docs page with a worked example shows: its files (each block after a
``<!-- file: NAME -->`` marker) and its shell commands with the exit status each states."""

from __future__ import annotations

import re


def files(text: str) -> dict[str, str]:
    """The page's files by name, each the code block under its marker."""
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w+\n(.*?)```", text, re.S))


def commands(text: str) -> list[tuple[str, int]]:
    """The first ``sh`` block's commands, each with the status its ``# exit N`` comment states."""
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None, "the page has no sh block"
    out = []
    for line in block.group(1).strip().splitlines():
        command, _, comment = line.partition("  # ")
        stated = re.fullmatch(r"exit (\d)", comment)
        assert stated is not None, f"no '# exit N' after {command!r}"
        out.append((command, int(stated.group(1))))
    return out
