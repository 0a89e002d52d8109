"""A priced, noisy model behind a local OpenAI-compatible server, for the forecast benchmark
(``bench_forecast.py`` loads this file with ``--plugin``).

``bench/<policy>?tpc=..&verbosity=..&cached=..&latency_ms=..&spread=..`` runs each turn through
the real OpenAI SDK adapter (Chat Completions), over HTTP, to a session of the model gateway
(``tests/support``: the staged gateway on 127.0.0.1) whose backing model is a reference policy
(``policy/<policy>``) that reports usage as a provider would, from what it was sent and what
it says — and with noise the forecast cannot know in advance:

- ``tpc``: tokens per character of the request and the answer (the tokenizer);
- ``verbosity``: mean output tokens a turn spends beyond its tool calls (exponentially spread);
- ``cached``: the share of the input billed as cached from the second turn on;
- ``spread``: the log-scale spread of a factor on every count, drawn once per world — the
  episode's seed, which a world's cells share whatever their fault or condition — so that a
  model finds some task texts wordier than their shape says, and all their cells with them;
- ``latency_ms``: wall time of each answer (±50 %).

Draws come from a generator seeded by the episode's seed and the model string, so a cell
costs the same on every run. The inner adapter prices its calls from ``--prices`` under the
name ``openai/gpt-test``; the run reads the model's price from the same entry.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import openai  # noqa: F401 - imported as a real model's preflight would, not in an episode
from support.model_servers import Bridge
from support.staged import StagedThreadedGateway

from limbo.adapter import model_adapter
from limbo.episode.briefing import ReferenceAdapter, ReferenceContext, brief
from limbo.episode.models import EpisodeContext, Message, ModelTurn, ToolDef, make_adapter
from limbo.log.records import Usage
from limbo.providers.openai import OpenAIAdapter

_GATEWAY: list[Any] = []


def gateway() -> Any:
    """The one loopback gateway of this process, started on first use."""
    if not _GATEWAY:
        _GATEWAY.append(StagedThreadedGateway().__enter__())
    return _GATEWAY[0]


class Noisy(ReferenceAdapter):
    """The server side: a reference policy whose usage is a provider's, with noise."""

    def __init__(self, policy: str, knobs: dict[str, float], salt: str) -> None:
        super().__init__("noisy")
        self.policy, self.knobs, self.salt = make_adapter(f"policy/{policy}"), knobs, salt
        self.rng: random.Random | None = None
        self.factor = 1.0

    def brief(self, key: ReferenceContext) -> None:
        super().brief(key)
        brief(self.policy, key)

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        k = self.knobs
        if self.rng is None:
            self.rng = random.Random(f"{ctx.seed}|{self.salt}")
            self.factor = self.rng.lognormvariate(0.0, k["spread"])
        turn: ModelTurn = await self.policy.generate(messages, tools, ctx)
        sent = sum(len(m.model_dump_json()) for m in messages) + len(
            json.dumps([t.model_dump() for t in tools]))
        said = len(turn.model_dump_json(include={"text", "tool_calls"}))
        tokens_in = int(sent * k["tpc"] * self.factor)
        tokens_out = int((said * k["tpc"] + self.rng.expovariate(1 / k["verbosity"]))
                         * self.factor)
        cached = int(tokens_in * k["cached"]) if len(messages) > 2 else 0
        await asyncio.sleep(k["latency_ms"] / 1000 * self.rng.uniform(0.5, 1.5))
        return turn.model_copy(update={"usage": Usage(
            input_tokens=tokens_in, cached_input_tokens=cached, output_tokens=tokens_out)})


KNOBS = {"tpc": 0.27, "verbosity": 60.0, "cached": 0.0, "spread": 0.2, "latency_ms": 10.0}


@model_adapter("bench")
class BenchModel(Bridge):
    """``bench/<policy>?knobs``: a Bridge to the gateway, backed by :class:`Noisy`."""

    def __init__(self, model: str, **params: Any) -> None:
        knobs = {**KNOBS, **{k: float(v) for k, v in params.items() if k in KNOBS}}
        salt = f"{model}|{sorted(params.items())}"
        super().__init__(gateway(), "openai", {"api": "chat"},
                         backing=lambda: Noisy(model, knobs, salt))

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        return OpenAIAdapter.price_per_mtok("gpt-test", {})
