"""A production harness (the real, pinned CLI) whose MCP server is ``limbo proxy`` instead of
the sandbox's, its model a script served by LIMBO's model gateway — offline, as
:mod:`limbo.harnesses.production` runs them, with only the MCP URL pointed elsewhere.

The harness's own configuration is the driver's (``ProductionHarness.command``: config files,
environment, the MCP server named ``sandbox``, its tool timeout). The gateway answers the
harness's side requests (a title, a summary: requests that offer none of the proxy's tools)
with a short text, and every request after ``finish`` with a closing text, as the driver does.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from limbo.base.registry import lookup
from limbo.episode.models import EpisodeContext, Message, ModelTurn, ToolDef, make_adapter
from limbo.gateway import Gateway
from limbo.harnesses.production import process
from limbo.harnesses.production.base import CLOSING, SIDE_ANSWER, Endpoints
from limbo.sim.service import Contract


@dataclass
class HarnessRun:
    outcome: process.Outcome
    turns: int
    requests: int


async def run_harness(harness: str, mcp_url: str, script: Path, prompt: str,
                      tools: set[str]) -> HarnessRun:
    """Run ``harness`` once: tools from ``mcp_url``, turns from ``script``."""
    cls = lookup("harness", harness)
    driver = object.__new__(cls)  # command() reads only the class's install and timeouts
    finished = False

    def before_turn(messages: list[Message], offered: list[ToolDef]) -> ModelTurn | None:
        if finished:
            return ModelTurn(text=CLOSING)
        if not any(t.name in tools for t in offered):
            return ModelTurn(text=SIDE_ANSWER)
        return None

    def after_turn(turn: ModelTurn) -> None:
        nonlocal finished
        finished = finished or any(c.name == "finish" for c in turn.tool_calls)

    gateway = Gateway()
    await gateway.start()
    try:
        episode = "proxied"
        session = gateway.open(episode, make_adapter(f"scripted/{script}"),
                               EpisodeContext(episode_id=episode, seed=0,
                                              contract=Contract.NATIVE),
                               before_turn=before_turn, after_turn=after_turn)
        at = Endpoints(gateway.base_url(episode), gateway.base_url(episode, "anthropic"),
                       mcp_url)
        with tempfile.TemporaryDirectory(prefix=f"limbo-proxied-{harness}-") as tmp:
            home, work = Path(tmp) / "home", Path(tmp) / "work"
            home.mkdir()
            work.mkdir()
            argv, extra = driver.command(home, prompt, at)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                   "LANG": "C.UTF-8", "TMPDIR": tmp, "NO_COLOR": "1", **extra}
            outcome = await process.run(argv, env, str(work), cls.wall_s, asyncio.Event())
        return HarnessRun(outcome, session.turns, session.requests)
    finally:
        await gateway.stop()
