"""Every line a client sends ``limbo mcp`` over stdio gets an answer, as over HTTP.

The SDK's stdio transport hands a line it cannot read to the server as an exception, which
the server logs and drops: a client that sent malformed JSON, bytes that are not UTF-8, an
empty batch, a lone surrogate or 100,000-deep nesting waits forever for its answer. Over
streamable HTTP the same body gets a JSON-RPC error. :class:`CheckedLines` stands in front of
the stdio transport and checks each line exactly as the HTTP transport checks a body —
``pydantic_core.from_json`` (``-32700 Parse error: ...``), then the JSON-RPC message model
(``-32602 Validation error: ...``), with ``id`` null — answering a line that fails through
the server's own write stream, and passing on the others. Blank lines are skipped.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio


class CheckedLines:
    """The client's lines for the SDK's stdio transport (its ``stdin``), checked first."""

    def __init__(self, source: Any = None) -> None:
        self.source = source or anyio.wrap_file(sys.stdin.buffer)
        self.answer: Callable[[Any], Awaitable[None]] | None = None
        self._ready = anyio.Event()

    def answer_with(self, send: Callable[[Any], Awaitable[None]]) -> None:
        """Where refusals go: the server's write stream, once the transport made it."""
        self.answer = send
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in self.source:
            if not raw.strip():
                continue
            line = raw.rstrip(b"\r\n")  # the frame's end, not the body's: as HTTP sees a body
            refusal = refused(line)
            if refusal is None:
                yield line.decode("utf-8")
                continue
            await self._ready.wait()
            assert self.answer is not None
            await self.answer(refusal)


def refused(raw: bytes) -> Any:
    """The SDK message answering ``raw``, when the HTTP transport would refuse it; else None."""
    import mcp_types as types
    import pydantic_core
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        return SessionMessage(_error(types.PARSE_ERROR, f"Parse error: {exc}"))
    try:
        types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        return SessionMessage(_error(types.INVALID_PARAMS, f"Validation error: {exc}"))
    return None


def _error(code: int, message: str) -> Any:
    import mcp_types as types

    return types.JSONRPCError(jsonrpc="2.0", id=None,
                              error=types.ErrorData(code=code, message=message))
