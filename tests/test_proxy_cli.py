"""``limbo proxy`` as a user meets it: the MCP it speaks (to the ``mcp`` SDK's own client, in
both ways a client opens a session), an upstream over streamable HTTP with a secret header,
concurrent calls, credentials kept out of everything written, and every mistake on the command
line or in the upstream answered with one line, exit 2, no traceback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from support.orders_server import rows
from support.proxy_runs import (
    LIMBO,
    SERVER,
    WORLD,
    Agent,
    before_ids,
    database,
    ledger,
    listen,
    proxy_args,
    run_stdio,
    upstream_cmd,
    wait_for_record,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_proxy_speaks_mcp_to_the_sdk_client(tmp_path: Path, mode: str) -> None:
    """Both ways a client opens a session (the handshake, or a probe for the stateless era
    first) reach the upstream's tools, plus ``finish`` and the task prompt."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    params = StdioServerParameters(command=LIMBO, args=proxy_args(db, out, "none",
                                                                   "orders_place"))

    async def go() -> tuple[list, str, object, object]:
        async with Client(params, mode=mode, cache=None) as client:
            await _passed_through(client)
            tools = (await client.list_tools()).tools
            prompt = (await client.get_prompt("task")).messages[0].content.text
            listed = await client.call_tool("list_orders", {})
            unknown = await client.call_tool("no_such_tool", {})
            return tools, prompt, listed, unknown

    tools, prompt, listed, unknown = asyncio.run(go())
    names = [t.name for t in tools]
    assert names == ["create_order", "refund_order", "add_lines", "list_orders", "list_lines",
                     "finish"]
    create = tools[0]
    assert "idempotency_key" in create.input_schema["properties"]  # the upstream's own schema
    assert prompt.startswith("Place an order for customer ")
    assert not listed.is_error and listed.structured_content == {"orders": []}
    assert unknown.is_error
    record = wait_for_record(out)
    assert record["report"] is None and record["outcome"]["report_status"] == "none"
    calls = [e["tool"] for e in record["events"] if e["type"] == "call"]
    assert calls == ["orders_list_orders", "no_such_tool"]  # declared names, and the stranger's


async def _passed_through(client: Client) -> None:
    """The upstream's prompts and resources reach the agent as the upstream serves them, with
    LIMBO's task prompt added; a resource that is not there is the upstream's error."""
    prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert prompts == ["daily_report", "task"]
    text = (await client.get_prompt("daily_report", {"day": "2026-12-04"})).messages[0]
    assert "placed on 2026-12-04" in text.content.text
    listed = (await client.list_resources()).resources
    assert [str(r.uri) for r in listed] == ["orders://policy/refunds"]
    read = (await client.read_resource("orders://policy/refunds")).contents[0]
    assert read.text == "An order is refunded once, in full."
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["orders://order/{order_id}"]
    with pytest.raises(MCPError):
        await client.read_resource("orders://order/ord_9999")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_upstream_over_http_with_a_secret_header(tmp_path: Path) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), str(db), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    secret = "hdr-secret-4f9c2a7e1b"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        args = ["proxy", "--upstream-url", f"http://127.0.0.1:{port}/mcp",
                "--upstream-header", f"Authorization: Bearer {secret}", "--world", str(WORLD),
                "--template", "orders_place", "--fault", "timeout_post", "--time-scale", "0.01",
                "--out", str(out)]
        params = StdioServerParameters(command=LIMBO, args=args)

        async def go() -> None:
            async with Client(params, cache=None) as client:
                await _passed_through(client)
                prompt = (await client.get_prompt("task")).messages[0].content.text
                agent = Agent(client, prompt)
                for _ in range(2):  # a timeout, then the blind re-issue
                    await agent.call("create_order", agent.order())
                await agent.finish()

        asyncio.run(go())
        record = wait_for_record(out)
    finally:
        server.terminate()
        server.wait()
    assert record["outcome"]["duplicate"] and len(rows(db, "orders")) == 2
    assert record["runtime"]["proxy"]["upstream"] == (
        f"http http://127.0.0.1:{port}/mcp (headers: Authorization)")
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))
    for path in out.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def test_credentials_in_arguments_are_never_written(tmp_path: Path) -> None:
    token = "tok-9d8e7f6a5b4c3d2e"

    async def with_token(agent: Agent) -> None:
        await agent.call("create_order", {**agent.order(), "api_token": token})
        await agent.call("list_orders", {"customer_id": os.environ["LIMBO_TEST_API_KEY"]})
        await agent.finish()

    os.environ["LIMBO_TEST_API_KEY"] = "env-secret-0a1b2c3d4e"
    try:
        run = run_stdio(tmp_path, "none", with_token)
    finally:
        secret = os.environ.pop("LIMBO_TEST_API_KEY")
    (call, _) = [e for e in run.record["events"] if e["type"] == "call"]
    assert call["args"]["api_token"] == "***" and call["args"]["sku"]  # effect fields kept
    assert run.record["outcome"]["exactly_once"]
    for path in run.out.rglob("*"):
        text = path.read_text(errors="replace") if path.is_file() else ""
        assert token not in text and secret not in text, path


def test_concurrent_calls_over_http_are_each_in_the_ledger_once(tmp_path: Path) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    proc, url = listen(proxy_args(db, out, "none", "orders_place"))
    try:
        async def go() -> None:
            async with Client(url, cache=None) as client:
                await _passed_through(client)
                await asyncio.gather(*(client.call_tool("create_order", {
                    "customer_id": f"cus_{i}", "sku": "MUG-01", "quantity": 1 + i % 3})
                    for i in range(12)))
                await client.call_tool("finish", {"status": "completed", "summary": "x"})

        asyncio.run(go())
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    record = wait_for_record(out)
    assert len(record["ledger"]) == 12 == len(rows(db, "orders"))
    assert sorted(e["request_id"] for e in record["ledger"]) == sorted(f"r{i}" for i in
                                                                     range(1, 13))
    journal = [json.loads(x) for x in next((out / "proxy").iterdir()).read_text().splitlines()]
    assert ledger(record) == database(db, before_ids(journal))


def test_garbage_on_stdin_is_answered_and_the_session_goes_on(tmp_path: Path) -> None:
    db, out = tmp_path / "orders.db", tmp_path / "run"
    proc = subprocess.Popen([LIMBO, *proxy_args(db, out, "none", "orders_place")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    lines = [json.dumps(init).encode() + b"\n",
             b"this is not json\n", b"\xff\xfe\x00 not utf-8\n", b"[1, 2]\n",
             b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}\n',
             b'{"jsonrpc": "2.0", "id": 8, "method": "no/such"}\n',
             b'{"jsonrpc": "2.0", "id": 9, "method": "ping"}\n']
    out_bytes, _ = proc.communicate(b"".join(lines), timeout=120)
    answers = [json.loads(x) for x in out_bytes.splitlines()]
    nulls = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert nulls == [-32700, -32700, -32600]  # not JSON, not UTF-8, not an object
    by_id = {a.get("id"): a for a in answers}
    assert by_id[7]["error"]["code"] == -32602 and by_id[8]["error"]["code"] == -32601
    assert by_id[9]["result"] == {}
    assert proc.returncode == 0 and wait_for_record(out)["outcome"]["tool_calls"] == 0


def _refused(tmp_path: Path, args: list[str], needle: str) -> None:
    done = subprocess.run([LIMBO, "proxy", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert needle in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2


def _base(tmp_path: Path, *extra: str) -> list[str]:
    return ["--upstream-cmd", upstream_cmd(tmp_path / "o.db"), "--world", str(WORLD),
            "--template", "orders_place", "--out", str(tmp_path / "run"), *extra]


@pytest.mark.parametrize(("args", "needle"), [
    (["--world", str(WORLD)], "exactly one of --upstream-cmd"),
    (["--upstream-cmd", "x", "--upstream-url", "http://127.0.0.1:1/mcp", "--world", str(WORLD)],
     "exactly one of --upstream-cmd"),
    (["--upstream-url", "https://shop.example.com/mcp", "--world", str(WORLD)],
     "needs --allow-remote"),
    (["--upstream-url", "http://user:pw@127.0.0.1:9/mcp", "--world", str(WORLD)],
     "must not carry credentials"),
    (["--upstream-url", "ftp://127.0.0.1/x", "--world", str(WORLD)], "not an http(s) URL"),
    (["--upstream-cmd", "", "--world", str(WORLD)], "--upstream-cmd is empty"),
    (["--upstream-cmd", "x 'unclosed", "--world", str(WORLD)], "--upstream-cmd: No closing"),
    (["--upstream-cmd", "x", "--upstream-header", "A: b", "--world", str(WORLD)],
     "--upstream-header is for --upstream-url"),
    (["--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header", "no colon",
      "--world", str(WORLD)], "NAME: VALUE"),
    (["--upstream-cmd", "x", "--world", "missing.toml"], "no such file"),
    (["--upstream-cmd", "x", "--world", str(ROOT / "examples" / "worlds" / "shop.toml")],
     "declares no proxy-only service"),
])
def test_command_line_mistakes_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    _refused(tmp_path, args, needle)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("extra", "needle"), [
    (["--fault", "nosuch"], "'nosuch' is not a mode the proxy applies"),
    (["--fault", "timeout_post@nosuch"], "'nosuch' is not a tool the world file declares"),
    (["--fault", "timeout_post@list_orders"], "is a read; faults act on writes"),
    (["--fault", "partial_batch@create_order"], "batch writes only"),
    (["--fault", "phantom_success@refund_order"], "result = {...}"),
    (["--fault", "partial_batch"], "no write of the task can carry it"),
    (["--time-scale", "0"], "--time-scale must be"),
    (["--time-scale", "nan"], "--time-scale must be"),
    (["--listen", "70000"], "--listen 70000"),
    (["--template", "nosuch"], "'nosuch' is not a template"),
    (["--recover"], "nothing to recover"),
])
def test_plan_mistakes_are_one_line(tmp_path: Path, extra: list[str], needle: str) -> None:
    _refused(tmp_path, _base(tmp_path, *extra), needle)
    assert not list((tmp_path / "run").glob("episodes*.jsonl"))


@pytest.mark.parametrize(("command", "needle"), [
    ("no-such-program-xyz", "cannot start 'no-such-program-xyz'"),
    (f"{sys.executable} -c pass", "cannot reach the upstream MCP server"),
    (f"{sys.executable} -c \"print('hello, not MCP')\"", "cannot reach the upstream MCP server"),
])
def test_an_upstream_that_is_not_an_mcp_server_is_one_line(tmp_path: Path, command: str,
                                                          needle: str) -> None:
    _refused(tmp_path, ["--upstream-cmd", command, "--world", str(WORLD),
                        "--out", str(tmp_path / "run")], needle)


def test_a_grid_run_directory_is_not_a_proxy_one(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"grid": {"name": "e1"}, "cells": 3}))
    _refused(tmp_path, _base(tmp_path), "records into a directory of its own")


def test_an_upstream_that_prints_to_stdout_still_works(tmp_path: Path) -> None:
    """A stdio server that writes a banner to stdout before speaking MCP (a common slip) is
    read past, not answered."""
    db, out = tmp_path / "orders.db", tmp_path / "run"
    noisy = f"sh -c 'echo starting the orders server...; exec {upstream_cmd(db)}'"
    args = ["proxy", "--upstream-cmd", noisy, "--world", str(WORLD), "--template", "orders_place",
            "--out", str(out)]

    async def go() -> bool:
        async with Client(StdioServerParameters(command=LIMBO, args=args), cache=None) as client:
            result = await client.call_tool("create_order", {"customer_id": "c", "sku": "s",
                                                             "quantity": 1})
            return bool(result.is_error)

    assert asyncio.run(go()) is False
    assert len(wait_for_record(out)["ledger"]) == 1 == len(rows(db, "orders"))


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _refused(tmp_path, _base(tmp_path, "--listen", str(port)), f"--listen {port}: cannot")
    assert not (tmp_path / "o.db").exists()  # the upstream was never started


def test_a_setup_the_upstream_fails_leaves_no_episode(tmp_path: Path) -> None:
    """The refund task's setup places an order; an upstream that dies on it stops the proxy
    in one line, with no journal left to recover (the agent never called)."""
    env = {**os.environ, "ORDERS_CRASH_SKU": "BAG-04"}
    out = tmp_path / "run"
    done = subprocess.run([LIMBO, *proxy_args(tmp_path / "o.db", out, "none", "orders_refund")],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                          timeout=120)
    assert done.returncode == 2 and "setup step 'order' got no answer" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(out.glob("proxy/*")) and not (out / "manifest.json").exists()


BARE_SERVER = '''
import json, sys
TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("create_order", "list_orders")]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, answer = msg["method"], None
    if method == "initialize":
        answer = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {
            "tools": {}}, "serverInfo": {"name": "bare", "version": "1"}}
    elif method == "tools/list":
        answer = {"tools": TOOLS}
    elif method == "tools/call":  # json.dumps writes NaN, which JSON does not have
        body = {"orders": [], "ratio": float("nan")}
        answer = {"content": [{"type": "text", "text": json.dumps(body)}],
                  "structuredContent": body}
    reply = {"result": answer} if answer is not None else {
        "error": {"code": -32601, "message": "no " + method}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **reply}), flush=True)
'''


def test_an_upstream_with_tools_only_gets_no_prompt_or_resource_request(tmp_path: Path) -> None:
    """A server that serves tools and nothing else (written without the SDK): the agent gets
    LIMBO's task prompt, and is told there are no resources — the upstream is not asked."""
    server = tmp_path / "bare_server.py"
    server.write_text(BARE_SERVER)
    args = ["proxy", "--upstream-cmd", f"{sys.executable} {server}", "--world", str(WORLD),
            "--template", "orders_place", "--out", str(tmp_path / "run")]

    async def go() -> tuple[list[str], str, str]:
        async with Client(StdioServerParameters(command=LIMBO, args=args), cache=None) as client:
            assert client.server_capabilities is not None
            assert client.server_capabilities.resources is None
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            task = (await client.get_prompt("task")).messages[0].content.text
            with pytest.raises(MCPError) as refused:
                await client.list_resources()
            return prompts, task, str(refused.value)

    prompts, task, refused = asyncio.run(go())
    assert prompts == ["task"] and task.startswith("Place an order for customer ")
    assert "serves no resources" in refused


def test_an_answer_carrying_nan_reaches_the_agent_and_the_record(tmp_path: Path) -> None:
    """A server that writes ``NaN`` (Python's json does): the proxy reads it as the string
    "NaN", so the agent is answered and the journal and record stay strict JSON."""
    server = tmp_path / "bare_server.py"
    server.write_text(BARE_SERVER)
    out = tmp_path / "run"
    args = ["proxy", "--upstream-cmd", f"{sys.executable} {server}", "--world", str(WORLD),
            "--template", "orders_place", "--out", str(out)]

    async def go() -> Any:
        async with Client(StdioServerParameters(command=LIMBO, args=args), cache=None) as client:
            return await asyncio.wait_for(client.call_tool("list_orders", {}), 60)

    answer = asyncio.run(go())
    assert not answer.is_error and answer.structured_content == {"orders": [], "ratio": "NaN"}
    record = wait_for_record(out)
    (result,) = [e for e in record["events"] if e["type"] == "result"]
    assert result["result"] == {"ok": True, "orders": [], "ratio": "NaN"}


def test_an_upstream_that_cannot_list_its_prompts_is_still_proxied(tmp_path: Path) -> None:
    """It says it serves prompts but refuses to list them: the proxy warns and serves the
    episode, with LIMBO's task prompt."""
    server = tmp_path / "bare_server.py"
    server.write_text(BARE_SERVER.replace('"tools": {}}', '"tools": {}, "prompts": {}}'))
    args = ["proxy", "--upstream-cmd", f"{sys.executable} {server}", "--world", str(WORLD),
            "--template", "orders_place", "--out", str(tmp_path / "run")]
    lines = [{"id": 1, "method": "initialize", "params": {
                 "protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}},
             {"method": "notifications/initialized"},
             {"id": 2, "method": "prompts/get", "params": {"name": "task"}}]
    done = subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=120,
                          input="".join(json.dumps({"jsonrpc": "2.0", **x}) + "\n"
                                        for x in lines))
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    text = answers[2]["result"]["messages"][0]["content"]["text"]
    assert text.startswith("Place an order for customer ")
    assert "did not list its prompts" in done.stderr and done.returncode == 0
