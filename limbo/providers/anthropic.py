"""``anthropic/<model>``: Claude models through the official SDK's Messages API.

``stream=true`` streams; the adapter accumulates the raw events itself so that tool input the
model wrote as invalid JSON reaches the sandbox as text (answered ``invalid_argument``) instead
of failing inside the SDK's parser. A stream without ``message_stop`` is retried.

Parameters: ``stream``, ``base_url``, ``api_key_env`` (default ``ANTHROPIC_API_KEY``),
``max_tokens`` (default 4096), ``temperature``, ``top_p``, ``parallel_tool_calls``, ``timeout``
(s), ``max_attempts``, ``prices``.
"""

from __future__ import annotations

from typing import Any

from limbo.adapter import Message, ToolDef, model_adapter
from limbo.providers import messages_api
from limbo.providers.base import IncompleteStream, ProviderAdapter, body, parsing
from limbo.providers.wire import Reply


@model_adapter("anthropic")
class AnthropicAdapter(ProviderAdapter):
    """An Anthropic model."""

    sdk_module = "anthropic"
    extra = "anthropic"
    key_env = "ANTHROPIC_API_KEY"

    def _make_client(self, key: str) -> Any:
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout}
        if self.params.get("base_url"):
            kwargs["base_url"] = str(self.params["base_url"])
        return self.sdk.AsyncAnthropic(**kwargs)

    async def _call(self, messages: list[Message], tools: list[ToolDef]) -> Reply:
        request = messages_api.request(messages, tools, self.model, self.params)
        with parsing():
            if not self.stream:
                message = await self.client().messages.create(**request)
                return messages_api.reply(body(message))
            acc = messages_api.Accumulator()
            stream = await self.client().messages.create(**request, stream=True)
            async for event in stream:
                acc.add(body(event))
            if not acc.done:
                raise IncompleteStream("no message_stop event")
            return acc.reply()
