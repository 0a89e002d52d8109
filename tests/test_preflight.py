"""Before the first cell, one cheap call per real model: an unknown model, a rejected key or an
unreachable server stops the run with one line and nothing written (``--no-preflight`` skips
it). The endpoints are real servers on 127.0.0.1 reached through the real SDKs."""

from __future__ import annotations

import json

from support.bad_server import CHAT_OK, BadServer, Reply
from support.hostile import cli, refused, untouched

SMALL = ["--template", "charge_invoice", "--fault", "none", "--contract", "native", "--no-cache",
         "--quiet"]


def test_a_wrong_model_name_stops_the_run_with_one_line_and_no_cell(capsys, tmp_path) -> None:
    """Must-show 2: a live vLLM-like server that serves `qwen3`; the run names `qwen-3`."""
    out = tmp_path / "out"
    with BadServer(Reply(body=CHAT_OK), models=["qwen3"]) as server:
        result = cli(capsys, "run", "--model", f"openai/qwen-3?api=chat&base_url={server.url}",
                     *SMALL, "--out", str(out))
        line = refused(result, "does not know the model 'qwen-3'")
        assert "HTTP 404" in line and "it lists: qwen3" in line
        assert server.gets == ["/v1/models"] and len(server.requests) == 1  # list, one probe
        assert json.loads(server.requests[0]["body"])["max_completion_tokens"] == 16
    untouched(out)


def test_a_listed_model_costs_no_request(capsys, tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK), models=["other", "qwen3:latest"]) as server:
        server.unknown_model = lambda body: None  # type: ignore[method-assign]  # as Ollama
        result = cli(capsys, "run", "--model", f"openai/qwen3?api=chat&base_url={server.url}",
                     *SMALL, "--out", str(tmp_path / "out"))
        assert result.code == 0, result.err
        assert server.gets == ["/v1/models"]  # listed (as Ollama names it): nothing asked
        assert len(server.requests) == 2  # the two cells' turns only


def test_an_unlisted_name_the_server_answers_to_passes(capsys, tmp_path) -> None:
    """llama.cpp lists its file name and answers any model name: the probe request decides."""
    with BadServer(Reply(body=CHAT_OK)) as server:
        server.models = ["models/qwen3-8b-q4.gguf"]
        server.unknown_model = lambda body: None  # type: ignore[method-assign]
        result = cli(capsys, "run", "--model", f"openai/qwen3?api=chat&base_url={server.url}",
                     *SMALL, "--out", str(tmp_path / "out"))
        assert result.code == 0, result.err
        assert len(server.requests) == 1 + 2  # the probe, then the two cells


def test_a_key_rejected_by_the_model_list_stops_before_anything_is_written(capsys,
                                                                           tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK), models=["m"]) as server:
        server.get_reply = Reply(401, b'{"error": {"message": "Incorrect API key"}}')
        result = cli(capsys, "run", "--model", f"anthropic/m?base_url="
                     f"{server.url.removesuffix('/v1')}", *SMALL, "--out", str(tmp_path / "out"))
        assert server.requests == []
    refused(result, "rejected the API key (HTTP 401); check $ANTHROPIC_API_KEY")
    untouched(tmp_path / "out")


def test_no_preflight_skips_the_call(capsys, tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK), models=["qwen3"]) as server:
        result = cli(capsys, "run", "--model", f"openai/qwen3?api=chat&base_url={server.url}",
                     *SMALL, "--out", str(tmp_path / "out"), "--no-preflight")
        assert result.code == 0, result.err
        assert server.gets == []


def test_each_distinct_model_is_asked_once(capsys, tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK), models=["a", "b"]) as server:
        models = [f"openai/{m}?api=chat&base_url={server.url}" for m in ("a", "b")]
        result = cli(capsys, "run", "--model", models[0], "--model", models[1],
                     "--model", "policy/verify", *SMALL, "--out", str(tmp_path / "out"))
        assert result.code == 0, result.err
        assert server.gets == ["/v1/models", "/v1/models"]


def test_a_dry_run_needs_neither_key_nor_server(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli(capsys, "run", "e1", "--model", "openai/gpt-4o", "--dry-run")
    assert result.code == 0, result.err
    assert "openai/gpt-4o: 1,155 episodes: $" in result.out and "a guess from the" in result.out
    assert "(to run it: model openai/gpt-4o needs an API key: set $OPENAI_API_KEY)" in result.out
