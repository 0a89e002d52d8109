"""``limbo mcp`` answers every message, over stdio exactly as over streamable HTTP: malformed
JSON, bytes that are not UTF-8, an empty batch, a lone surrogate in the arguments and
100,000-deep nesting each get the same JSON-RPC error on both transports (no client waits
forever), and the episode is still recorded. A port that cannot be served is a usage error."""

from __future__ import annotations

import json
import re
import select
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from support.hostile import cli, refused, untouched

LIMBO = str(Path(sys.executable).parent / "limbo")
VERSION = "2025-06-18"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
CASES = {
    "malformed json": b'{"jsonrpc": "2.0", "id": 2, "method": ',
    "not utf-8": b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "x": "\xff\xfe"}',
    "empty batch": b"[]",
    "lone surrogate": b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": '
                      b'"billing_get_invoice", "arguments": {"invoice_id": "\\ud800"}}}',
    "deep nesting": b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": '
                    b'"billing_get_invoice", "arguments": {"x": ' + b"[" * 100_000
                    + b"]" * 100_000 + b"}}}",
}
FINISH = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "finish",
          "arguments": {"status": "failed", "summary": "probed", "uncertain_actions": []}}}


class Stdio:
    def __init__(self, out: Path) -> None:
        self.proc = subprocess.Popen([LIMBO, "mcp", "--out", str(out)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(self, body: bytes) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(body + b"\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        assert ready, f"no answer to {body[:60]!r}"
        return json.loads(self.proc.stdout.readline())


def _http_server(out: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([LIMBO, "mcp", "--transport", "http", "--out", str(out)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    return proc, re.search(r"http://\S+/mcp", line).group(0)


def _post(url: str, body: bytes, session: str | None) -> tuple[dict, str | None]:
    headers = {"content-type": "application/json", "mcp-protocol-version": VERSION,
               "accept": "application/json, text/event-stream",
               **({"mcp-session-id": session} if session else {})}
    request = urllib.request.Request(url, body, headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw, sid = response.read(), response.headers.get("mcp-session-id")
    except urllib.error.HTTPError as exc:
        raw, sid = exc.read(), None
    return (json.loads(raw) if raw else {}), sid


def test_every_bad_message_is_answered_over_stdio_as_over_http(capsys, tmp_path) -> None:
    stdio = Stdio(tmp_path / "stdio")
    http, url = _http_server(tmp_path / "http")
    try:
        assert stdio.ask(json.dumps(INIT).encode())["id"] == 1
        _, session = _post(url, json.dumps(INIT).encode(), None)
        answers = {}
        for label, body in CASES.items():
            on_stdio, (on_http, _) = stdio.ask(body), _post(url, body, session)
            answers[label] = on_stdio
            assert on_stdio == on_http, label  # the same error, word for word
            assert on_stdio["id"] is None and on_stdio["error"]["code"] in (-32700, -32602)
        assert answers["malformed json"]["error"]["message"].startswith("Parse error: ")
        assert answers["empty batch"]["error"]["code"] == -32602
        done = stdio.ask(json.dumps(FINISH).encode())  # and the episode still ends normally
        assert done["id"] == 9 and not done["result"].get("isError")
        _post(url, json.dumps(FINISH).encode(), session)
    finally:
        stdio.proc.stdin.close()
        stdio.proc.wait(60)
        http.wait(60)
    for out in (tmp_path / "stdio", tmp_path / "http"):
        record = json.loads((out / "episodes.jsonl").read_text())
        assert record["outcome"]["termination"] == "finished"
        assert record["report"]["summary"] == "probed"
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["kind"] == "mcp" and manifest["episodes"] == 1
        status = cli(capsys, "status", str(out))  # its own kind: each episode is its cell
        assert status.code == 0 and "limbo mcp: 1 episode recorded" in status.out


def test_a_port_that_cannot_be_served_is_a_usage_error(capsys, tmp_path) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "mcp", "--transport", "http", "--port", "99999", "--out", str(out)),
            "--port 99999: choose 0 (any free port) to 65535")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        refused(cli(capsys, "mcp", "--transport", "http", "--port", port, "--out", str(out)),
                f"--port {port}: cannot listen on 127.0.0.1")
    refused(cli(capsys, "mcp", "--port", "8000", "--out", str(out)), "--port is for --transport")
    untouched(out)
