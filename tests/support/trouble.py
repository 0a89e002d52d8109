"""A plugin of model adapters that fail the ways a real run fails, for the rated-rule tests:
``trouble/model-error`` (the provider gives up: ``model_error``), ``trouble/crash`` (the
adapter raises: ``infra_error``) and ``trouble/slow`` (it never answers: ``timeout`` past
``--episode-timeout``). Loaded with ``--plugin tests/support/trouble.py``."""

from __future__ import annotations

import asyncio
from typing import Any

from limbo.base.errors import ModelError
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelAdapter,
    ModelTurn,
    ToolDef,
    model_adapter,
)


@model_adapter("trouble")
class Trouble(ModelAdapter):
    """Fails as its model name says, on the first turn."""

    @classmethod
    def price_per_mtok(cls, model: str, params: dict[str, Any]) -> dict[str, float] | None:
        return {"input": 0.0, "cached_input": 0.0, "output": 0.0}

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        if self.model == "model-error":
            raise ModelError("trouble/model-error: the provider gave up after its retries")
        if self.model == "slow":
            await asyncio.sleep(60)  # a wall-clock hang: --episode-timeout ends it
        raise RuntimeError(f"trouble/{self.model}: the adapter crashed")
