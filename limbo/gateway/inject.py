"""Provider-side failures the gateway can stage on a given request, for testing how adapters
and harnesses cope with a misbehaving model API. Each request to a session is numbered from 1
(retries included); ``session.inject[n]`` says what request ``n`` gets instead of a clean answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HttpError:
    """Answer with an error status (429, 500, 529, ...) in the API's own error format."""

    status: int
    retry_after_s: float | None = None
    message: str = "injected by the limbo gateway"


@dataclass(frozen=True)
class Drop:
    """Read the request, then hang up without answering."""


@dataclass(frozen=True)
class Truncate:
    """Send only the first ``events`` stream events (or, unstreamed, half the body), then hang
    up. With ``clean``, end the chunked body properly instead, so the stream is well-formed but
    lacks its terminal events."""

    events: int = 2
    clean: bool = False


@dataclass(frozen=True)
class StreamError:
    """Start a stream, then report a provider failure inside it (``response.failed``, an
    ``error`` event, or an error chunk), with the API's error ``code``."""

    code: str = "server_error"


Injection = HttpError | Drop | Truncate | StreamError
