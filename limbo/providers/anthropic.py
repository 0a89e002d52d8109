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

from limbo.episode.models import Message, ToolDef, model_adapter
from limbo.providers import messages_api
from limbo.providers.base import ProviderAdapter
from limbo.providers.encoded import absolute
from limbo.providers.replies import IncompleteStream, body, parsing, unfailed
from limbo.providers.wire import Reply


@model_adapter("anthropic")
class AnthropicAdapter(ProviderAdapter):
    """An Anthropic model."""

    sdk_module = "anthropic"
    extra = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    models_path = "/v1/models"
    models_query = {"limit": 1000}
    url_env = "ANTHROPIC_BASE_URL"
    default_url = "https://api.anthropic.com"
    wire_api = "messages"

    def _make_client(self, key: str) -> Any:
        return self.sdk.AsyncAnthropic(api_key=key, max_retries=0, base_url=self.base_url(),
                                       http_client=self._http_client())

    def _request(self, messages: list[Message], tools: list[ToolDef]) -> dict[str, Any]:
        request = messages_api.request(messages, tools, self.model, self.params)
        if self.stream:
            request["stream"] = True
        return request

    async def _call(self, request: bytes) -> Reply:
        """Through the SDK's own request path (auth, version header, errors), without its
        typed request models: the body is already the wire format, the answer comes back as
        decoded JSON (``cast_to=object``)."""
        with parsing():
            client = self.client()
            answer = await client.post(absolute(client, "/v1/messages"), content=request,
                                       cast_to=object, options=self._options(),
                                       stream=self.stream,
                                       stream_cls=self.sdk.AsyncStream[object])
            if not self.stream:
                return messages_api.reply(unfailed(body(answer), messages_api.failure))
            acc = messages_api.MessagesAccumulator()
            async for event in answer:
                acc.add(body(event))
            if not acc.done:
                raise IncompleteStream("no message_stop event")
            return acc.reply()
