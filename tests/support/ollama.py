"""A loopback server that speaks Ollama's native chat API, for the README's adapter example.

``POST /api/chat`` takes ``{"model", "messages", "tools", "stream": false, "options"}`` —
messages ``{"role", "content", "tool_calls": [{"function": {"name", "arguments"}}],
"tool_name"}``, tools ``{"type": "function", "function": {"name", "description",
"parameters"}}`` — and answers ``{"model", "created_at", "message": {"role": "assistant",
"content", "tool_calls"}, "done": true, "done_reason", "prompt_eval_count", "eval_count"}``,
with tool-call arguments as JSON objects, as Ollama does. A request of another shape gets
Ollama's ``400 {"error": ...}``. The turns come from ``answer`` (a reference policy in the
tests), so an episode driven through this server can be compared with the in-process one.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from limbo.episode.models import Message, ModelTurn, ToolCall, ToolDef
from support.bad_server import POLL_S

Answer = Callable[[list[Message], list[ToolDef]], ModelTurn]
ROLES = ("system", "user", "assistant", "tool")


def parse(body: Any) -> tuple[list[Message], list[ToolDef]]:
    """The conversation and tools of a chat request; ``ValueError`` naming what is wrong."""
    if not isinstance(body, dict) or body.get("stream") is not False or not body.get("model"):
        raise ValueError("expected {model, messages, tools, stream: false}")
    messages = []
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}]: role and content are required")
        calls = [ToolCall(id=f"ollama_{i}_{j}", name=c["function"]["name"],
                          arguments=c["function"]["arguments"])
                 for j, c in enumerate(m.get("tool_calls") or [])]
        messages.append(Message(role=m["role"], content=m["content"], tool_calls=calls,
                                name=m.get("tool_name")))
    tools = []
    for t in body.get("tools") or []:
        if t.get("type") != "function" or set(t["function"]) != {"name", "description",
                                                                  "parameters"}:
            raise ValueError(f"a tool must be {{type: function, function: {{name, "
                             f"description, parameters}}}}, not {t!r:.80}")
        tools.append(ToolDef(**t["function"]))
    return messages, tools


def reply(model: str, turn: ModelTurn, prompt: int) -> dict[str, Any]:
    """Ollama's answer carrying ``turn``."""
    calls = [{"function": {"name": c.name, "arguments": c.arguments}} for c in turn.tool_calls]
    return {"model": model, "created_at": "2026-12-01T00:00:00Z",
            "message": {"role": "assistant", "content": turn.text or "", "tool_calls": calls},
            "done": True, "done_reason": "stop", "prompt_eval_count": prompt,
            "eval_count": 7 + 5 * len(calls)}


class OllamaServer:
    """Ollama's chat API on a free loopback port; every request body is kept in ``requests``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = -1  # one write an answer: see support/plain.py (40 ms a call)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, out = owner.handle(self.path, raw)
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(POLL_S,),
                                       daemon=True)

    def handle(self, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if path != "/api/chat":
            return 404, {"error": f"404 page not found: {path}"}
        try:
            body = json.loads(raw)
            messages, tools = parse(body)
        except (ValueError, KeyError, TypeError) as exc:
            return 400, {"error": str(exc)}
        self.requests.append(body)
        turn = self.answer(messages, tools)
        out = reply(body["model"], turn, prompt=len(raw) // 4)
        self.replies.append(out)
        return 200, out

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OllamaServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def policy_answer(adapter: Any, ctx: Any) -> Answer:
    """Turns from ``adapter`` (a briefed reference policy) with the episode's context."""
    def answer(messages: list[Message], tools: list[ToolDef]) -> ModelTurn:
        return asyncio.run(adapter.generate(messages, tools, ctx))  # type: ignore[no-any-return]
    return answer
