"""Replies a provider adapter cannot use as a turn, and the checks that find them.

A provider can fail without an HTTP error: a stream cut short, a body that is not JSON, usage
that cannot be, a reply with nothing in it, or a reply that says itself that the generation
failed. Each is an exception here, retried like a transport error by
:class:`limbo.providers.base.ProviderAdapter` and, once attempts run out, a ``model_error`` —
never a turn, so never in the response cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from limbo.providers.wire import Reply


class IncompleteStream(Exception):
    """A stream ended without its terminal event (a truncated response): retryable."""


class UnparseableReply(Exception):
    """A reply we cannot read — a body that is not JSON (an HTML error page with status 200, a
    ``null``, a non-JSON stream line), not the provider's format, or impossible usage: retried
    like a transport error, then ``model_error``."""


class EmptyReply(UnparseableReply):
    """A reply with neither text nor tool calls (``{}``): the model said nothing, which is not
    the agent finishing."""


@contextlib.contextmanager
def parsing() -> Iterator[None]:
    """Reading a reply: what goes wrong while decoding or walking it is the reply's fault."""
    try:
        yield
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, ArithmeticError,
            RecursionError) as exc:
        if isinstance(exc, UnparseableReply):
            raise
        raise UnparseableReply(f"unreadable reply ({type(exc).__name__}: {str(exc)[:200]})") from None


def body(response: Any) -> dict[str, Any]:
    """A decoded reply (or stream event) as a dict; :class:`UnparseableReply` when the body was
    not a JSON object (the SDKs hand back the raw text, ``None`` or a list then)."""
    if not isinstance(response, dict):
        kind = "null" if response is None else f"a {type(response).__name__}"
        raise UnparseableReply(f"unreadable reply (the body is {kind}, not a JSON object)")
    return response


def unfailed(data: dict[str, Any], failure: Callable[[dict[str, Any]], str | None]
             ) -> dict[str, Any]:
    """``data`` (a reply, or a stream's chunk), unless its API's ``failure`` reads in it that
    the generation failed: then :class:`FailedReply`."""
    why = failure(data)
    if why is not None:
        raise FailedReply(f"the reply reports a failure ({why[:200]})")
    return data


def checked(reply: Reply) -> Reply:
    """``reply`` if its token counts are counts and it says something."""
    for name in ("input", "cached", "cache_write", "output"):
        value = getattr(reply.tokens, name)
        if type(value) is not int or value < 0:
            raise UnparseableReply(f"unreadable reply (usage: {name} tokens = {value!r})")
    if not reply.tool_calls and not (reply.text or "").strip():
        raise EmptyReply("empty reply (no text and no tool calls)")
    return reply


class FailedReply(UnparseableReply):
    """A reply that says the generation failed (an ``error`` member, ``finish_reason: error``,
    ``status: failed``) though it came with status 200: a failure, retried like a 5xx, never
    a turn — and so never cached."""


class StreamFailure(Exception):
    """The provider reported a failure inside a stream (``response.failed``, ``error``)."""

    def __init__(self, code: str | None, message: str) -> None:
        super().__init__(f"{code or 'error'}: {message}")
        self.code = code
