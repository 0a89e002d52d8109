"""A fault mode is written once: its act runs on the sandbox's simpy boundary and in the proxy
in front of a real API alike.

:class:`EchoAfter500` is defined here and nowhere else: the write commits, the agent hears a
500, and a copy of the write lands 5 s after the original (the sandbox's seconds). This file is
the plugin the commands load (``--plugin tests/test_fault_act.py``), so it imports only LIMBO at
module level; ``limbo run``, ``limbo mcp`` and ``limbo proxy`` each run the one act.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from limbo.sim.act import HALF_TRIP, Act, At, Fail, Focal, Later, Send, note
from limbo.sim.fault import Fault, fault

HERE = Path(__file__).resolve()
LIMBO = str(Path(sys.executable).parent / "limbo")
COPY_AFTER_S = 5.0


class EchoAfter500(Fault):
    """A gateway that answers 500 after the write committed, and retries it behind the agent."""

    family = "read-back cannot"
    families = ("read-back cannot",)
    group = None
    sees = "HTTP 500 at the normal round trip"
    hidden = "commits; a copy lands 5 s later and commits again unless a key dedupes it"

    def act(self, call: Focal) -> Act:
        copy_at = At(HALF_TRIP, COPY_AFTER_S)
        yield note(delivered=True, copy_at=copy_at)
        yield Later(copy_at, attempt="redelivered")
        yield Send()
        return Fail("server_error")


if __name__.startswith("limbo_plugin_"):  # loaded by a command's --plugin
    fault("echo_after_500")(EchoAfter500)


@pytest.fixture
def echo() -> Iterator[str]:
    """The mode registered in this process for one test, and taken out after it (the other
    tests' sweeps over the registry never see it)."""
    from limbo.base import registry

    fault("echo_after_500")(EchoAfter500)
    try:
        yield EchoAfter500.name
    finally:
        registry._REGISTRY["fault"].pop(EchoAfter500.name, None)
        del EchoAfter500.name


def _events(record: dict, kind: str) -> list[dict]:
    return [e for e in record["events"] if e["type"] == kind]


def _limbo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


def test_the_act_runs_on_the_simpy_boundary(echo: str) -> None:
    from support.cells import cell_for

    from limbo.episode.run_one import run_episode

    record = run_episode(cell_for("charge_invoice", fault="echo_after_500",
                                  model="policy/blind"))
    (fired,) = _events(record, "fault")
    call = next(e for e in _events(record, "call") if e["tool"] == record["cell"]["focal_write"])
    half = record["header"]["timing"]["write_s"] / 2
    assert fired["mode"] == "echo_after_500" and fired["detail"]["delivered"] is True
    assert fired["detail"]["copy_at"] == call["t"] + half + COPY_AFTER_S  # the sandbox's clock
    (arrival,) = _events(record, "arrival")
    assert arrival["attempt"] == "redelivered" and arrival["outcome"] == "committed"
    first = next(e for e in _events(record, "result") if e["id"] == call["id"])
    assert first["result"]["error"]["kind"] == "server_error"
    assert record["outcome"]["fault_fired"] and record["outcome"]["duplicate"]


def test_the_same_act_runs_in_limbo_proxy(tmp_path: Path) -> None:
    from support.proxy_runs import Agent, run_stdio

    async def once(agent: Agent) -> None:
        ok, answer = await agent.call("create_order", agent.order())
        assert not ok and answer["error"]["kind"] == "server_error"
        await asyncio.sleep(0.2)  # the copy lands 0.05 s after the original (scale 0.01)
        await agent.finish("failed", uncertain=["create_order"])

    run = run_stdio(tmp_path, "echo_after_500", once, "orders_place", "--plugin", str(HERE))
    (fired,) = _events(run.record, "fault")
    assert fired["mode"] == "echo_after_500" and fired["detail"]["delivered"] is True
    call = next(e for e in _events(run.record, "call") if e["tool"] == "orders_create_order")
    assert abs(fired["detail"]["copy_at"] - (call["t"] + COPY_AFTER_S * 0.01)) < 0.01
    (arrival,) = _events(run.record, "arrival")
    assert arrival["attempt"] == "redelivered" and arrival["outcome"] == "committed"
    assert run.record["outcome"]["fault_fired"] and run.record["outcome"]["duplicate"]


def test_limbo_run_and_limbo_mcp_load_the_mode(tmp_path: Path) -> None:
    ran = _limbo("run", "--plugin", str(HERE), "--template", "charge_invoice", "--fault",
                 "echo_after_500", "--model", "policy/blind", "--out", "out", "--quiet",
                 cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    records = _records(tmp_path / "out")
    assert records and all(r["cell"]["fault"] == "echo_after_500" for r in records)
    assert all(_events(r, "arrival")[0]["attempt"] == "redelivered" for r in records)
    from mcp import Client, StdioServerParameters

    out = tmp_path / "mcp"
    params = StdioServerParameters(command=LIMBO, env=dict(os.environ), args=[
        "mcp", "--plugin", str(HERE), "--template", "charge_invoice", "--fault",
        "echo_after_500", "--out", str(out)])
    charge = {"customer_id": "cus_122", "amount_cents": 37900, "currency": "eur",
              "description": "INV-0031"}

    async def go() -> bool:
        async with Client(params) as client:
            first = await client.call_tool("billing_create_charge", charge)
            await client.call_tool("finish", {"status": "failed", "summary": "500",
                                              "uncertain_actions": []})
            return bool(first.is_error)

    assert asyncio.run(go())
    for _ in range(100):
        if (out / "episodes.jsonl").exists():
            break
        asyncio.run(asyncio.sleep(0.1))
    (record,) = _records(out)
    assert _events(record, "fault")[0]["mode"] == "echo_after_500"
    assert _events(record, "arrival")[0]["attempt"] == "redelivered"


def test_a_mode_that_is_only_a_simpy_process_is_refused_by_the_proxy_by_name() -> None:
    from support.proxy_runs import WORLD

    from limbo.base import registry
    from limbo.base.errors import UsageError
    from limbo.proxy.declared import load
    from limbo.proxy.plan import parse
    from limbo.sim.fault import Fault as Base

    class SimpyOnly(Base):
        def inject(self, req):  # type: ignore[no-untyped-def]
            return (yield from self.inner.handle(req))

    fault("simpy_only_mode")(SimpyOnly)
    catalog = load(WORLD)
    catalog.bind(["create_order"])
    try:
        with pytest.raises(UsageError, match="overrides inject: write it as an act"):
            parse("simpy_only_mode", catalog, ["orders_create_order"], 0, 1.0)
    finally:
        registry._REGISTRY["fault"].pop("simpy_only_mode", None)
