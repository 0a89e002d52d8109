"""``openai/<model>``: OpenAI models through the official SDK.

The Responses API by default; ``api=chat`` uses Chat Completions, the format of most
OpenAI-compatible servers (``base_url=http://host:port/v1`` reaches vLLM, llama.cpp, Ollama or
the model gateway). ``stream=true`` streams (the final ``response.completed`` event, or the
accumulated chunks, give the turn; a stream that ends before them is retried).

Parameters: ``api`` (responses|chat), ``stream``, ``base_url``, ``api_key_env`` (default
``OPENAI_API_KEY``), ``temperature``, ``top_p``, ``max_tokens``, ``reasoning_effort``, ``seed``
(chat), ``parallel_tool_calls`` (default true), ``timeout`` (s), ``max_attempts``, ``prices``.
"""

from __future__ import annotations

from typing import Any

from limbo.adapter import Message, ToolDef, model_adapter
from limbo.errors import UsageError
from limbo.providers import chat_api, responses_api
from limbo.providers.base import (
    COMMON_PARAMS,
    IncompleteStream,
    ProviderAdapter,
    StreamFailure,
    body,
    parsing,
)
from limbo.providers.wire import Reply

APIS = ("responses", "chat")


@model_adapter("openai")
class OpenAIAdapter(ProviderAdapter):
    """An OpenAI (or OpenAI-compatible) model."""

    sdk_module = "openai"
    extra = "openai"
    key_env = "OPENAI_API_KEY"
    params_allowed = COMMON_PARAMS | {"api", "reasoning_effort", "seed"}

    def __init__(self, model: str, **params: Any) -> None:
        super().__init__(model, **params)
        if self.api not in APIS:
            raise UsageError(f"openai/{model}: api must be one of {', '.join(APIS)}")

    @property
    def api(self) -> str:
        return str(self.params.get("api", "responses"))

    def _make_client(self, key: str) -> Any:
        kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": self.timeout}
        if self.params.get("base_url"):
            kwargs["base_url"] = str(self.params["base_url"])
        return self.sdk.AsyncOpenAI(**kwargs)

    async def _call(self, messages: list[Message], tools: list[ToolDef]) -> Reply:
        if self.api == "chat":
            return await self._chat(messages, tools)
        return await self._responses(messages, tools)

    async def _responses(self, messages: list[Message], tools: list[ToolDef]) -> Reply:
        request = responses_api.request(messages, tools, self.model, self.params)
        with parsing():
            if not self.stream:
                response = await self.client().responses.create(**request)
                return responses_api.reply(body(response))
            final: dict[str, Any] | None = None
            stream = await self.client().responses.create(**request, stream=True)
            async for event in stream:
                data = body(event)
                kind = data.get("type")
                if kind in ("response.completed", "response.incomplete"):
                    final = data.get("response") or {}
                elif kind in ("response.failed", "error"):
                    err = (data.get("response") or {}).get("error") or data
                    raise StreamFailure(err.get("code"), str(err.get("message", "")))
            if final is None:
                raise IncompleteStream("no response.completed event")
            return responses_api.reply(final)

    async def _chat(self, messages: list[Message], tools: list[ToolDef]) -> Reply:
        request = chat_api.request(messages, tools, self.model, self.params)
        with parsing():
            if not self.stream:
                completion = await self.client().chat.completions.create(**request)
                return chat_api.reply(body(completion))
            acc = chat_api.Accumulator()
            stream = await self.client().chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True})
            async for chunk in stream:
                acc.add(body(chunk))
            if not acc.done:
                raise IncompleteStream("no chunk with a finish_reason")
            return acc.reply()
