"""``inspect/<model>``: any model Inspect AI can reach, as a LIMBO model adapter.

This is the whole bridge between the two tools: an episode still runs in LIMBO's own harness,
world, boundary and tool layer, and only the model turn goes through Inspect (its providers,
retries, cache and transcript). Inside an Inspect eval the adapter uses the eval's model and
mirrors the conversation into the sample's messages, so Inspect's log viewer shows what the
agent saw; outside one (``limbo run --model inspect/openai/gpt-4o``) it builds the model with
``get_model``.

Every request carries the episode id in an ``X-Limbo-Episode`` header: LIMBO's model gateway
routes on it (a reference policy served over the OpenAI wire format answers the right
episode), and providers ignore it.

A provider failure that Inspect gives up on — and an Inspect sample limit, which LIMBO cannot
count as one of its own — ends the episode as ``model_error`` with the reason recorded.
"""

from __future__ import annotations

import asyncio
from typing import Any

from limbo.base.errors import ModelError, UsageError
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelAdapter,
    ModelTurn,
    ToolCall,
    ToolDef,
    model_adapter,
)
from limbo.log.inspect_logs import require_inspect
from limbo.log.records import Usage

EPISODE_HEADER = "X-Limbo-Episode"


@model_adapter("inspect")
class InspectAdapter(ModelAdapter):
    """A model served by Inspect AI. ``state`` is the Inspect sample the episode belongs to
    (``None`` outside an eval)."""

    def __init__(self, model: str, state: Any = None, **params: Any) -> None:
        super().__init__(model, **params)
        self.state = state
        self._model: Any = None

    def preflight(self) -> None:
        require_inspect()
        self._inspect_model()

    def _inspect_model(self) -> Any:
        """The eval's own model inside an eval (its ``-M`` arguments and roles included);
        else the model this adapter names."""
        if self._model is None:
            from inspect_ai.model import get_model

            try:
                self._model = get_model() if self.state is not None else get_model(
                    self.model, **self.params)
            except Exception as exc:  # noqa: BLE001 - Inspect's own message names the fix
                raise UsageError(f"inspect/{self.model}: {exc}") from None
        return self._model

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        require_inspect()
        from inspect_ai.model import GenerateConfig

        model = self._inspect_model()
        chat = [to_inspect(m) for m in messages]
        config = GenerateConfig(extra_headers={EPISODE_HEADER: ctx.episode_id})
        try:
            output = await model.generate(chat, tools=[tool_info(t) for t in tools],
                                          config=config)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - whatever Inspect gave up on, recorded
            raise ModelError(f"inspect/{self.model}: {type(exc).__name__}: {exc}") from None
        if self.state is not None:
            self.state.messages = [*chat, output.message]
            self.state.output = output
        return from_inspect(output)


def to_inspect(message: Message) -> Any:
    """One LIMBO message as Inspect's chat message."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCall as InspectCall

    if message.role == "system":
        return ChatMessageSystem(content=message.content)
    if message.role == "user":
        return ChatMessageUser(content=message.content)
    if message.role == "tool":
        return ChatMessageTool(content=message.content, tool_call_id=message.tool_call_id,
                               function=message.name)
    calls = [InspectCall(id=c.id, function=c.name,
                         arguments=c.arguments if isinstance(c.arguments, dict) else {},
                         parse_error=None if isinstance(c.arguments, dict) else c.arguments)
             for c in message.tool_calls]
    return ChatMessageAssistant(content=message.content, tool_calls=calls or None)


def tool_info(tool: ToolDef) -> Any:
    """A LIMBO tool as Inspect's tool description. Inspect keeps a subset of JSON Schema
    (keywords it does not know are dropped from what the model is shown); the boundary still
    validates every call against the full schema."""
    from inspect_ai.tool import ToolInfo, ToolParams

    return ToolInfo(name=tool.name, description=tool.description,
                    parameters=ToolParams.model_validate(tool.parameters))


def from_inspect(output: Any) -> ModelTurn:
    """Inspect's model output as a LIMBO turn. A call whose arguments did not parse keeps
    the parse error as its raw arguments, so the boundary refuses it as it would any
    unparseable call."""
    message = output.message
    calls = [ToolCall(id=c.id, name=c.function,
                      arguments=c.arguments if c.parse_error is None else str(c.parse_error))
             for c in message.tool_calls or []]
    usage = output.usage
    return ModelTurn(text=message.text or None, tool_calls=calls, usage=Usage(
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        cached_input_tokens=(usage.input_tokens_cache_read or 0) if usage else 0,
        cost_usd=usage.total_cost if usage else None))
