"""What a production-harness episode records when something other than the agent ends it: the
cell's limits (the same record as the minimal loop's), a model that fails after retries
(``model_error``), a harness that breaks (``infra_error`` with its stderr) or overruns its wall
time (``timeout``), and a harness that is not installed."""

from __future__ import annotations

import asyncio
import sys

import pytest
from support.cells import cell_for
from support.harness_runs import crashed, require, without_ids
from support.model_servers import OnPolicy

from limbo.base.errors import ModelError
from limbo.episode.run_one import arun_episode, run_episode
from limbo.harnesses.production.codex import CodexHarness
from limbo.harnesses.production.install import ENV
from limbo.sim.config import Limits

HARNESS = "codex"  # the quickest to start; the machinery under test is shared by all four


def _cell(**kw):
    return cell_for("charge_invoice", "billing_create_charge", harness=HARNESS,
                    model="policy/verify", **kw)


@pytest.mark.parametrize("limits", [Limits(model_turns=2), Limits(tool_calls=1),
                                    Limits(agent_time_s=6.0)], ids=["turns", "tools", "time"])
def test_limits_end_a_harness_episode_as_they_end_the_minimal_loop(limits) -> None:
    require(HARNESS)
    cell = _cell(limits=limits)
    record = run_episode(cell)
    reference = run_episode(cell.model_copy(update={"harness": "minimal"}))
    assert record["outcome"]["termination"] != "finished"
    assert record["outcome"] == reference["outcome"]
    assert without_ids(record["events"]) == without_ids(reference["events"])


class FailsOnSecondTurn(OnPolicy):
    """The reference policy, whose provider gives up on the second turn."""

    provider = "policy"

    def __init__(self) -> None:
        super().__init__("verify")
        self.turns = 0

    async def generate(self, messages, tools, ctx):
        self.turns += 1
        if self.turns == 2:
            raise ModelError("provider unavailable after 5 attempts")
        return await self.policy.generate(messages, tools, ctx)


@pytest.mark.parametrize("harness", ["codex", "claude-code"])
def test_a_model_that_fails_ends_the_episode_as_model_error(harness) -> None:
    """The harness is stopped at once: Claude Code would otherwise keep retrying the 500s the
    gateway answers with, for minutes."""
    require(harness)
    cell = _cell().model_copy(update={"harness": harness})
    record = asyncio.run(arun_episode(cell, FailsOnSecondTurn()))  # type: ignore[arg-type]
    outcome = record["outcome"]
    assert outcome["termination"] == "model_error"
    assert "provider unavailable" in outcome["termination_reason"]
    assert outcome["model_turns"] == 2 and outcome["commits"]["charge"] == 1
    assert record["runtime"]["harness"]["killed"] == "asked to stop"


class BrokenConfig(CodexHarness):
    """The real Codex binary, given a config file it cannot parse."""

    def command(self, home, prompt, at):
        argv, env = super().command(home, prompt, at)
        (home / ".codex" / "config.toml").write_text("model = [unterminated\n")
        return argv, env


class Overruns(CodexHarness):
    """A harness process that never answers: it must be killed at its wall-clock bound, however
    fast or slow the machine is (the real Codex binary could finish within a short bound)."""

    wall_s = 0.3

    def command(self, home, prompt, at):
        _, env = super().command(home, prompt, at)
        return ["sleep", "60"], env


class Crashes(CodexHarness):
    """A harness process killed by a signal nobody sent it (an interpreter that crashes)."""

    def command(self, home, prompt, at):
        _, env = super().command(home, prompt, at)
        return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGBUS)"], env


@pytest.mark.parametrize(("driver", "termination", "needle"), [
    (BrokenConfig, "infra_error", "config.toml"),
    (Overruns, "timeout", "ran past 0.3 s"),
    (Crashes, "infra_error", "harness died of SIGBUS (signal 7)"),
])
def test_a_harness_that_breaks_or_overruns_is_recorded_with_why(driver, termination,
                                                                needle) -> None:
    require(HARNESS)
    record = asyncio.run(arun_episode(_cell(), make_harness=driver))
    outcome = record["outcome"]
    assert outcome["termination"] == termination and needle in outcome["termination_reason"]
    facts = record["runtime"]["harness"]
    assert facts["exit_code"] != 0 or facts["killed"]
    assert outcome["tool_calls"] == 0 and record["ledger"] == []
    assert crashed(record) == (driver is Crashes)  # only a crash is run again by the test runs


def test_a_harness_that_is_not_installed_is_an_infra_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "nothing-here"))
    record = run_episode(_cell())
    outcome = record["outcome"]
    assert outcome["termination"] == "infra_error"
    assert "not found" in outcome["termination_reason"] and "make harnesses" in \
        outcome["termination_reason"]
