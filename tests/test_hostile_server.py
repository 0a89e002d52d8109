"""A misbehaving OpenAI-compatible server on 127.0.0.1, met through the real SDKs and the CLI.

A reply that cannot be read — an HTML page with status 200, a body that is not JSON, ``null``, a
stream line that is not JSON, impossible usage — is a ``model_error``, retried like a transport
error; an empty reply is a ``model_error``, never the agent finishing. A rejected key or an
unknown model stops the run with one line. Every cell is recorded exactly once either way, and
a run that leaves errored cells exits 1, naming their reason."""

from __future__ import annotations

import pytest
from support.bad_server import CHAT_OK, BadServer, Reply
from support.hostile import cli, records, refused

HTML = Reply(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
CHAT_USAGE = (b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, '
              b'"finish_reason": "stop"}], "usage": {"prompt_tokens": %s, "completion_tokens": 1}}')


def _run(capsys, tmp_path, server: BadServer, params: str, attempts: int = 1):
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", f"openai/m?base_url={server.url}&max_attempts="
                 f"{attempts}{params}", "--template", "charge_invoice", "--contract", "native",
                 "--fault", "none", "--out", str(out), "--no-cache", "--quiet")
    return result, out


CASES = [
    ("html page, status 200", "&api=chat", HTML, "unreadable reply (the body is a str, not a JSON object)"),
    ("malformed json", "&api=chat", Reply(body=b'{"choices": [ '), "unreadable reply (JSONDecodeError"),
    ("null body", "&api=chat", Reply(body=b"null"), "unreadable reply (the body is null"),
    ("empty object", "&api=chat", Reply(body=b"{}"), "empty reply (no text and no tool calls)"),
    ("json array", "&api=chat", Reply(body=b"[1, 2]"), "the body is a list, not a JSON object"),
    ("json string", "&api=chat", Reply(body=b'"ok"'), "the body is a str"),
    ("empty body", "&api=chat", Reply(body=b""), "unreadable reply"),
    ("choices null", "&api=chat", Reply(body=b'{"choices": null}'), "empty reply"),
    ("choices a string", "&api=chat", Reply(body=b'{"choices": "x"}'), "unreadable reply (AttributeError"),
    ("message a string", "&api=chat", Reply(body=b'{"choices": [{"message": "x"}]}'), "unreadable reply"),
    ("tool calls not a list", "&api=chat",
     Reply(body=b'{"choices": [{"message": {"role": "assistant", "tool_calls": 5}}]}'), "unreadable reply (TypeError"),
    ("negative tokens", "&api=chat", Reply(body=CHAT_USAGE % b"-5"), "usage: input tokens = -5"),
    ("tokens not a number", "&api=chat", Reply(body=CHAT_USAGE % b'"many"'), "unreadable reply (ValueError"),
    ("huge token count", "&api=chat", Reply(body=CHAT_USAGE % b"1e400"), "unreadable reply"),
    ("responses: html", "", HTML, "unreadable reply (the body is a str"),
    ("responses: empty object", "", Reply(body=b"{}"), "empty reply"),
    ("responses: output a string", "", Reply(body=b'{"output": "x"}'), "unreadable reply"),
    ("stream: non-json line", "&api=chat&stream=true",
     Reply(body=b"data: hello there\n\n", content_type="text/event-stream"), "unreadable reply (JSONDecodeError"),
    ("stream: null chunk", "&api=chat&stream=true",
     Reply(body=b"data: null\n\ndata: [DONE]\n\n", content_type="text/event-stream"), "unreadable reply"),
    ("stream: html", "&api=chat&stream=true", HTML, "truncated stream"),
    ("stream: no finish", "&api=chat&stream=true",
     Reply(body=b'data: {"choices": []}\n\ndata: [DONE]\n\n', content_type="text/event-stream"),
     "truncated stream"),
    ("bad request", "&api=chat", Reply(400, b'{"error": {"message": "no"}}'), "HTTP 400"),
]


@pytest.mark.parametrize(("label", "params", "reply", "needle"), CASES, ids=[c[0] for c in CASES])
def test_a_reply_that_cannot_be_read_is_a_model_error(capsys, tmp_path, label, params,
                                                      reply: Reply, needle: str) -> None:
    with BadServer(reply) as server:
        result, out = _run(capsys, tmp_path, server, params)
    assert result.code == 1, result.err  # errored cells remain
    assert "2 × model_error: openai/m: " in result.out
    got = records(out)
    assert len(got) == 2 and len(server.requests) == 2  # one attempt per cell (max_attempts=1)
    for record in got:
        assert record["outcome"]["termination"] == "model_error"
        assert needle in record["outcome"]["termination_reason"], record["outcome"]
    status = cli(capsys, "status", str(out))
    assert status.code == 1 and "2 cells ended in an error" in status.out


def test_an_unreadable_reply_is_retried_like_a_transport_error(capsys, tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK)) as server:
        server.script = [HTML, Reply(body=b"{}")]
        result, out = _run(capsys, tmp_path, server, "&api=chat", attempts=3)
    assert result.code == 0, result.err
    terminations = sorted(r["outcome"]["termination"] for r in records(out))
    assert terminations == ["finished", "finished"] and len(server.requests) == 4


def test_an_anthropic_reply_that_cannot_be_read_is_a_model_error(capsys, tmp_path) -> None:
    with BadServer(HTML) as server:
        out = tmp_path / "out"
        result = cli(capsys, "run", "--model", f"anthropic/m?base_url="
                     f"{server.url.removesuffix('/v1')}&max_attempts=1", "--template",
                     "charge_invoice", "--contract", "native", "--fault", "none", "--out",
                     str(out), "--no-cache", "--quiet", )
    assert result.code == 1, result.err
    assert all("unreadable reply" in r["outcome"]["termination_reason"] for r in records(out))


@pytest.mark.parametrize(("status", "needle"), [
    (401, "the provider rejected the API key (HTTP 401); check $OPENAI_API_KEY"),
    (403, "the provider rejected the API key (HTTP 403)"),
    (404, "not found at the provider (HTTP 404)"),
])
def test_a_rejected_key_or_unknown_model_stops_the_run_in_one_line(capsys, tmp_path, status: int,
                                                                   needle: str) -> None:
    import json

    with BadServer(Reply(status, b'{"error": {"message": "nope"}}')) as server:
        result, out = _run(capsys, tmp_path, server, "&api=chat")
    refused(result, needle)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "HTTP" in manifest["stop_reason"]
    assert records(out) == []


def test_a_server_slower_than_the_timeout_is_a_model_error(capsys, tmp_path) -> None:
    with BadServer(Reply(body=CHAT_OK, delay_s=3.0)) as server:
        result, out = _run(capsys, tmp_path, server, "&api=chat&timeout=0.3")
    assert result.code == 1, result.err
    assert all("request timed out" in r["outcome"]["termination_reason"] for r in records(out))
