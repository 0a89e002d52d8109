"""Runs that are no paper grid, made as a user makes them, for the summary's tests: episodes
served by ``limbo mcp`` to the ``mcp`` SDK's own client, and by ``limbo proxy`` in front of the
orders server (:mod:`support.proxy_runs`)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from support.proxy_runs import Agent, run_stdio

LIMBO = str(Path(sys.executable).parent / "limbo")
CHARGE = {"customer_id": "cus_122", "amount_cents": 37900, "currency": "eur",
          "description": "INV-0031"}
DONE = {"status": "completed", "summary": "Charged INV-0031.", "uncertain_actions": []}


async def _blind(client: Client) -> None:
    """Charge, and on an error charge again without looking: a duplicate when it committed."""
    first = await client.call_tool("billing_create_charge", CHARGE)
    if first.is_error:
        await client.call_tool("billing_create_charge", CHARGE)
    await client.call_tool("finish", DONE)


async def _idle(client: Client) -> None:
    """Finish without touching the focal write: the fault never fires (an unrated episode)."""
    await client.call_tool("finish", DONE)


def mcp_episode(out: Path, fault: str, blind: bool = True) -> None:
    """One episode of ``limbo mcp`` (charge_invoice under ``fault``) into ``out``."""
    before = _lines(out)
    params = StdioServerParameters(command=LIMBO, args=["mcp", "--template", "charge_invoice",
                                                         "--fault", fault, "--out", str(out)])

    async def go() -> None:
        async with Client(params) as client:
            await (_blind if blind else _idle)(client)

    with ThreadPoolExecutor(1) as pool:  # a loop of its own, whoever else runs one here
        pool.submit(asyncio.run, go()).result()
    deadline = time.monotonic() + 60
    while _lines(out) == before:  # the server writes the record once the client has gone
        assert time.monotonic() < deadline, f"no new record in {out}"
        time.sleep(0.05)


def _lines(out: Path) -> int:
    path = out / "episodes.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _reissue(agent: Agent) -> None:
    """Place the order; on a timeout place it again without a key or a look."""
    ok, _ = await agent.call("create_order", agent.order())
    if not ok:
        await agent.call("create_order", agent.order())
    await agent.finish()


def proxy_run(tmp: Path) -> Path:
    """A ``limbo proxy`` run: one episode under a lost acknowledgement; its run directory."""
    return run_stdio(tmp, "timeout_post", _reissue).out


def records(run: Path) -> list[dict[str, Any]]:
    """The run's records as cell + outcome rows, with ``rated`` and the fault's ``family`` as
    the run's manifest recorded it."""
    design = json.loads((run / "manifest.json").read_text())["design"]
    out = []
    for line in (run / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        row = {**record["cell"], **record["outcome"]}
        row["rated"] = row["fault_fired"] and row["termination"] not in (
            "infra_error", "model_error", "timeout")
        row["family"] = design["faults"][row["fault"]]["family"]
        out.append(row)
    return out
