"""What adapters are told (issue 11, must-show 4): a provider adapter and a --plugin adapter get
the conversation, the tools and a neutral context — episode id, seed, contract — and nothing of
the answer key (plan, intents, read lags). The key reaches a reference policy only through the
explicit :func:`limbo.episode.briefing.brief` hook; a policy that was not briefed refuses to guess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cells import cell_for
from support.hostile import write_plugin
from support.reference import briefed

from limbo.base.errors import InfraError
from limbo.episode.briefing import ReferenceAdapter, context
from limbo.episode.models import EpisodeContext, Message, make_adapter
from limbo.episode.run_one import run_episode
from limbo.providers.openai import OpenAIAdapter
from limbo.sim.cell import Cell
from limbo.sim.world import World

NEUTRAL = {"episode_id", "seed", "contract"}
ANSWER_KEY = ("plan", "vars", "tool_specs", "read_lag", "intents", "template", "task")
CELL = cell_for("charge_invoice", "billing_create_charge", fault="timeout_post",
                contract="keys-everywhere", seed=7)


def secrets_of(world: World) -> list[str]:
    """Texts only the answer key holds: the plan's id and step ids, the instance's values."""
    plan = world.task.template
    values = [v for v in world.vars.values() if isinstance(v, str) and len(v) > 3]
    return [plan.id, *(step.id for step in plan.steps), *values]


def assert_neutral(ctx: Any, world: World) -> None:
    assert type(ctx) is EpisodeContext
    assert set(type(ctx).model_fields) == NEUTRAL
    assert ctx.model_dump(mode="json") == {"episode_id": CELL.episode_id, "seed": 7,
                                           "contract": "keys-everywhere"}
    assert not any(hasattr(ctx, name) for name in ANSWER_KEY)
    text = json.dumps(ctx.model_dump(mode="json")) + repr(ctx)
    assert not [s for s in secrets_of(world) if s in text]


def test_a_provider_adapter_gets_the_neutral_context_only(gw) -> None:
    """The real OpenAI adapter, over HTTP to a gateway session answering as policy/verify."""
    world = World.of(CELL)
    gw.close(CELL.episode_id)
    session = gw.open(CELL.episode_id, briefed(world), context(world))
    adapter = OpenAIAdapter("gpt-test", api="chat", base_url=gw.base_url(CELL.episode_id))
    passed: list[Any] = []
    generate = adapter.generate

    async def spy(messages: list[Message], tools: Any, ctx: Any) -> Any:
        passed.append(ctx)
        return await generate(messages, tools, ctx)

    adapter.generate = spy  # type: ignore[method-assign]
    record = run_episode(CELL, adapter)
    assert record["outcome"]["termination"] == "finished" and session.turns == len(passed) > 2
    for ctx in passed:
        assert_neutral(ctx, world)
    assert not isinstance(adapter, ReferenceAdapter) and not hasattr(adapter, "reference")
    assert record["ledger"] == run_episode(CELL)["ledger"]  # the policy behind it had its key


SPY = '''
import json
from limbo.episode.models import ModelAdapter, ModelTurn, ToolCall, model_adapter


@model_adapter("ctxspy")
class CtxSpy(ModelAdapter):
    """Writes down the context object it is passed, then finishes."""

    async def generate(self, messages, tools, ctx):
        seen = {"type": f"{type(ctx).__module__}.{type(ctx).__qualname__}",
                "fields": ctx.model_dump(mode="json"), "attrs": sorted(vars(ctx)),
                "repr": repr(ctx), "self": sorted(vars(self)),
                "tools": [t.name for t in tools]}
        with open(self.params["out"], "a") as fh:
            fh.write(json.dumps(seen) + "\\n")
        if len(messages) > 3:
            return ModelTurn(tool_calls=[ToolCall(id="f", name="finish", arguments={
                "status": "failed", "summary": "only looked", "uncertain_actions": []})])
        return ModelTurn(tool_calls=[ToolCall(id=f"w{len(messages)}", name="wait",
                                              arguments={"seconds": 1})])
'''


def test_a_plugin_adapter_gets_the_neutral_context_only(tmp_path: Path, capsys) -> None:
    """Loaded with --plugin by `limbo episode`, the plugin writes down what it was passed."""
    from support.hostile import cli

    plugin = write_plugin(tmp_path, "ctxspy", SPY)
    out = tmp_path / "seen.jsonl"
    model = f"ctxspy/x?out={out}"
    done = cli(capsys, "episode", "--model", model, "--plugin", str(plugin), "--fault",
               "timeout_post", "--contract", "keys-everywhere", "--json")
    assert done.code == 0, done.err
    record = json.loads(done.out)
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(seen) == record["outcome"]["model_turns"] == 2
    world = World.of(Cell(**record["cell"]))
    for entry in seen:
        assert entry["type"] == "limbo.episode.models.EpisodeContext"
        assert set(entry["fields"]) == NEUTRAL and entry["fields"]["contract"] == "keys-everywhere"
        assert entry["fields"]["episode_id"] == record["episode_id"]
        assert not set(entry["attrs"]) & set(ANSWER_KEY)
        assert not [s for s in secrets_of(world) if s in json.dumps(entry["fields"]) + entry["repr"]]
        assert "reference" not in entry["self"]
        assert "billing_create_charge" in entry["tools"]  # the tools, as any model gets them


def test_the_context_cannot_be_extended_or_changed() -> None:
    ctx = context(World.of(CELL))
    with pytest.raises(ValueError):
        EpisodeContext(**ctx.model_dump(), plan="the answer")
    with pytest.raises(ValueError):
        ctx.seed = 8  # type: ignore[misc]


def test_a_reference_policy_that_was_not_briefed_refuses_to_guess() -> None:
    world = World.of(CELL)
    policy = make_adapter("policy/verify")
    opening = [Message(role="system", content="s"), Message(role="user", content=world.prompt())]
    with pytest.raises(InfraError, match="policy/verify is a reference policy and was not "
                                         "briefed"):
        asyncio.run(policy.generate(opening, [], context(world)))
    turn = asyncio.run(briefed(world).generate(opening, [], context(world)))
    assert turn.tool_calls[0].name == world.task.template.steps[0].tool


def test_the_listing_says_which_providers_are_briefed() -> None:
    """In a process of its own: the plugins other tests load register adapters in this one
    (some subclass the reference policy, and are listed as briefed, rightly)."""
    shown = subprocess.run([str(Path(sys.executable).parent / "limbo"), "list", "models"],
                           capture_output=True, text=True, timeout=120, check=True)
    briefed_ = {line.split("/")[0] for line in shown.stdout.splitlines()
                if line.endswith("[reference: briefed with the plan]")}
    assert briefed_ == {"policy"}
