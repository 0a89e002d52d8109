"""``scripted/PATH``: model turns from a JSON file. The documented example runs as shown; a bad
file is one line naming it (exit 2, nothing written); a script that runs out of turns ends its
episodes as ``model_error``, recorded, and the grid goes on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.hostile import cli, records, refused, untouched

from limbo.providers import scripted as module

ROOT = Path(__file__).resolve().parents[1]


def documented() -> tuple[str, str]:
    """The JSON script and the command of docs/models.md's "Scripted turns from a file"."""
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Scripted turns from a file", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    command = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip()
    return script, command


def test_the_documented_script_runs_as_shown(tmp_path, capsys, monkeypatch) -> None:
    script, command = documented()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "turns.json").write_text(script)
    args = command.split()[1:]
    assert args[:1] == ["episode"] and "scripted/turns.json" in args
    shown = cli(capsys, *args, "--json")
    assert shown.code == 0, shown.err
    out = json.loads(shown.out)["outcome"]
    assert (out["report_status"], out["missing"], out["overclaim"]) == ("completed", True, True)
    assert out["input_tokens"] == 900 and out["model_turns"] == 3
    fault = args[args.index("--fault") + 1]
    clean = cli(capsys, *[a if a != fault else "none" for a in args], "--json")
    assert json.loads(clean.out)["outcome"]["exactly_once"]


BAD = {
    "missing": (None, "does not exist"),
    "not-utf8": (b'[{"text": "caf\xe9"}]', "not UTF-8 text (byte 0xe9 at offset 14)"),
    "not-json": (b'[{"text": "a"},]', "not JSON: Expecting value at line 1 column 16"),
    "empty": (b"", "not JSON: Expecting value at line 1 column 1"),
    "empty-list": (b"[]", "must hold a non-empty JSON list of turns"),
    "object": (b'{"turns": []}', "must hold a non-empty JSON list of turns"),
    "unknown-field": (b'[{"text": "a", "tool": "x"}]', "turn 1: tool: Extra inputs are not permitted"),
    "bad-name": (b'[{"text": "a"}, {"tool_calls": [{"name": 3}]}]',
                 "turn 2: tool_calls.0.name: Input should be a valid string"),
    "silent-turn": (b'[{"text": "  "}]', "turn 1 has neither text nor tool calls"),
    "negative-usage": (b'[{"text": "a", "usage": {"input_tokens": -1}}]',
                       "turn 1: usage.input_tokens: Input should be greater than or equal to 0"),
}


@pytest.mark.parametrize("command", ["episode", "run"])
@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_a_bad_script_is_one_line_naming_the_file(tmp_path, capsys, case, command) -> None:
    content, needle = BAD[case]
    path = tmp_path / f"{case}.json"
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "out"
    extra = ["--out", str(out), "--template", "charge_invoice"] if command == "run" else []
    result = cli(capsys, command, "--model", f"scripted/{path}", *extra)
    line = refused(result, f"scripted/{path}: ")
    assert needle in line
    untouched(out)


def test_a_directory_parameters_and_an_oversized_file_are_refused(tmp_path, capsys,
                                                                  monkeypatch) -> None:
    assert "is not a file" in refused(cli(capsys, "episode", "--model", f"scripted/{tmp_path}"),
                                      "scripted/")
    path = tmp_path / "s.json"
    path.write_text('[{"text": "done"}]')
    assert "takes no parameters (got loop)" in refused(
        cli(capsys, "episode", "--model", f"scripted/{path}?loop=true"), "scripted/")
    monkeypatch.setattr(module, "MAX_BYTES", 10)
    assert "the file is over" in refused(cli(capsys, "episode", "--model", f"scripted/{path}"),
                                         "scripted/")


def test_running_out_of_turns_is_a_recorded_model_error_and_the_grid_goes_on(tmp_path,
                                                                            capsys) -> None:
    path = tmp_path / "short.json"
    path.write_text(json.dumps([{"tool_calls": [{"name": "wait", "arguments": {"seconds": 1}}]}]))
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", f"scripted/{path}", "--template", "charge_invoice",
                 "--fault", "none", "--fault", "timeout_post", "--contract", "native",
                 "--out", str(out), "--quiet")
    assert result.code == 1, result.err  # recorded, and the run says errored cells remain
    assert "4 × model_error: scripted/" in result.out
    got = records(out)
    assert len(got) == 4 and all(r["cell"]["model"] == f"scripted/{path}" for r in got)
    for record in got:
        outcome = record["outcome"]
        assert outcome["termination"] == "model_error" and outcome["model_turns"] == 2
        assert outcome["termination_reason"] == (f"scripted/{path}: the script's 1 turns are "
                                                 f"used up; the episode asked for turn 2")


def test_text_arguments_and_lone_surrogates_reach_the_record_as_valid_utf8(tmp_path,
                                                                          capsys) -> None:
    path = tmp_path / "odd.json"
    path.write_text('[{"tool_calls": [{"name": "data_insert", "arguments": "{\\"table\\": ",'
                    ' "id": "x1"}]}, {"text": "bye \\ud800"}]')
    shown = cli(capsys, "episode", "--model", f"scripted/{path}", "--json")
    assert shown.code == 0, shown.err
    record = json.loads(shown.out)
    [result] = [e for e in record["events"] if e["type"] == "result"]
    assert result["id"] == "x1" and result["result"]["error"]["kind"] == "invalid_argument"
    assert [e["text"] for e in record["events"] if e["type"] == "turn"][-1] == "bye \ufffd"
