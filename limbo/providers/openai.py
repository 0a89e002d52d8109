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

from limbo.base.errors import UsageError
from limbo.episode.models import Message, ToolDef, model_adapter
from limbo.providers import chat_api, responses_api
from limbo.providers.base import COMMON_PARAMS, ProviderAdapter
from limbo.providers.encoded import absolute
from limbo.providers.replies import IncompleteStream, StreamFailure, body, parsing, unfailed
from limbo.providers.wire import Reply

APIS = ("responses", "chat")


@model_adapter("openai")
class OpenAIAdapter(ProviderAdapter):
    """An OpenAI (or OpenAI-compatible) model."""

    sdk_module = "openai"
    extra = "openai"
    key_env = "OPENAI_API_KEY"
    params_allowed = COMMON_PARAMS | {"api", "reasoning_effort", "seed"}
    url_env = "OPENAI_BASE_URL"
    default_url = "https://api.openai.com/v1"

    def __init__(self, model: str, **params: Any) -> None:
        super().__init__(model, **params)
        if self.api not in APIS:
            raise UsageError(f"openai/{model}: api must be one of {', '.join(APIS)}")

    @property
    def api(self) -> str:
        return str(self.params.get("api", "responses"))

    def flavour(self) -> str:
        return self.api

    def route_probe(self) -> bool:
        """An OpenAI-compatible server (any endpoint but OpenAI's) often serves Chat
        Completions only, and lists its models all the same: the preflight asks the Responses
        route too."""
        return self.api == "responses" and self.base_url() != self.default_url

    def route_hint(self) -> str:
        if self.api != "responses":
            return ""
        return (f"the server may not serve the Responses API (POST {self.base_url()}/responses)"
                f"; if it speaks Chat Completions, add api=chat to the model "
                f"({self.spec}?api=chat&...)")

    def _make_client(self, key: str) -> Any:
        return self.sdk.AsyncOpenAI(api_key=key, max_retries=0, base_url=self.base_url(),
                                    http_client=self._http_client())

    def _request(self, messages: list[Message], tools: list[ToolDef]) -> dict[str, Any]:
        api = chat_api if self.api == "chat" else responses_api
        request: dict[str, Any] = api.request(messages, tools, self.model, self.params)
        if self.stream:
            request["stream"] = True
            if self.api == "chat":
                request["stream_options"] = {"include_usage": True}
        return request

    async def _post(self, path: str, request: bytes) -> Any:
        """The SDK's own request path (auth, headers, timeouts, errors) without its typed
        transformation of the body, which walks every message against the API's type
        definitions (about 27 ms a call on our conversations): our body is already the wire
        format. The answer comes back as decoded JSON (``cast_to=object``)."""
        client = self.client()
        return await client.post(absolute(client, path), content=request, cast_to=object,
                                 options=self._options(), stream=self.stream,
                                 stream_cls=self.sdk.AsyncStream[object])

    async def _call(self, request: bytes) -> Reply:
        if self.api == "chat":
            return await self._chat(request)
        return await self._responses(request)

    async def _responses(self, request: bytes) -> Reply:
        with parsing():
            if not self.stream:
                return responses_api.reply(unfailed(body(await self._post("/responses", request)),
                                                    responses_api.failure))
            final: dict[str, Any] | None = None
            async for event in await self._post("/responses", request):
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

    async def _chat(self, request: bytes) -> Reply:
        with parsing():
            if not self.stream:
                return chat_api.reply(unfailed(body(await self._post("/chat/completions", request)),
                                               chat_api.failure))
            acc = chat_api.ChatAccumulator()
            async for chunk in await self._post("/chat/completions", request):
                acc.add(unfailed(body(chunk), chat_api.failure))
            if not acc.done:
                raise IncompleteStream("no chunk with a finish_reason")
            return acc.reply()
