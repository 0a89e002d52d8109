"""``limbo list episodes RUN_DIR [--model M] [--termination T] [--fault F]``: a run's episode ids
with their outcomes, each once; and listings that read as sentences, not raw docstrings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hostile import cli, refused

GRID = ["--template", "charge_invoice", "--contract", "native", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    from limbo.cli import main

    out = tmp_path_factory.mktemp("list") / "run"
    assert main(["run", *GRID, "--out", str(out)]) == 0
    return out


def _stored(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]


def test_every_episode_once_with_its_outcome(capsys, run: Path) -> None:
    listed = cli(capsys, "list", "episodes", str(run))
    assert listed.code == 0
    lines = listed.out.strip().splitlines()
    stored = _stored(run)
    assert [line.split()[0] for line in lines] == [r["episode_id"] for r in stored]
    for line, record in zip(lines, stored, strict=True):
        outcome, cell = record["outcome"], record["cell"]
        assert line.split()[1] == outcome["termination"]
        assert f"dup={'yes' if outcome['duplicate'] else 'no'}" in line
        assert f"EOS={'yes' if outcome['exactly_once'] else 'no'}" in line
        assert f"{cell['model']} · minimal" in line and f" · {cell['fault']} · " in line


def test_filters_combine(capsys, run: Path) -> None:
    stored = _stored(run)
    listed = cli(capsys, "list", "episodes", str(run), "--model", "policy/blind", "--model",
                 "policy/keyed", "--fault", "timeout_post", "--termination", "finished")
    expected = [r["episode_id"] for r in stored
                if r["cell"]["model"] in ("policy/blind", "policy/keyed")
                and r["cell"]["fault"] == "timeout_post"
                and r["outcome"]["termination"] == "finished"]
    assert expected and [line.split()[0] for line in listed.out.splitlines()] == expected


def test_bad_uses_are_one_line(capsys, run: Path) -> None:
    refused(cli(capsys, "list", "episodes"), "needs the run directory")
    refused(cli(capsys, "list", "episodes", str(run), "--termination", "done"),
            "--termination 'done': choose from finished")
    refused(cli(capsys, "list", "faults", "--fault", "none"), "only `limbo list episodes")
    refused(cli(capsys, "list", "episodes", str(run / "nope")), "no run directory")


def test_listings_show_sentences_not_docstring_markup(capsys) -> None:
    for what in ("harnesses", "models", "conditions"):
        listed = cli(capsys, "list", what)
        assert listed.code == 0
        assert "``" not in listed.out and ":class:" not in listed.out, listed.out
    harnesses = cli(capsys, "list", "harnesses").out
    minimal = next(line for line in harnesses.splitlines() if line.startswith("minimal"))
    assert "LIMBO's own agent loop, in this process" in minimal
