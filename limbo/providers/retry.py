"""Our retries for provider calls: bounded exponential backoff with seeded jitter.

The official SDKs retry on their own by default; we switch that off (``max_retries=0``) so
there is exactly one retry policy, it is bounded, and its jitter comes from the cell's seed
(``limbo.base.rng.generator(seed, "provider.retry")``) rather than global randomness. A server's
``Retry-After`` (or OpenAI's ``retry-after-ms``) wins over the computed delay, up to a cap.

The waits are real (wall clock): this is the provider side, outside the simulation. The sleep
function is injectable so tests run at full speed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from limbo.base.errors import ModelError
from limbo.base.rng import Rng
from limbo.base.words import plural

log = logging.getLogger("limbo.providers")
T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


async def real_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)  # wall-clock-ok: provider backoff, never sim code


@dataclass(frozen=True)
class Retryable:
    """A failure worth another attempt, with the server's requested wait if it gave one."""

    reason: str
    retry_after_s: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_s: float = 1.0
    cap_s: float = 30.0
    max_retry_after_s: float = 120.0
    sleep: Sleep = field(default=real_sleep, compare=False)

    def delay(self, retry: int, rng: Rng, retry_after: float | None) -> float:
        """Wait before retry number ``retry`` (1-based): Retry-After if given (capped), else
        ``min(cap, base * 2^(retry-1))`` scaled by a jitter factor in [0.5, 1]."""
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after_s))
        return min(self.cap_s, self.base_s * 2.0 ** (retry - 1)) * (0.5 + 0.5 * rng.random())


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or
    an HTTP date (relative to the response's own ``date`` header, so no local clock is read)."""
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000.0
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when, now = parsedate_to_datetime(value), headers.get("date")
            return (when - parsedate_to_datetime(now)).total_seconds() if now else None
    except (TypeError, ValueError):
        return None


async def with_retries(call: Callable[[], Awaitable[T]], policy: RetryPolicy,
                       classify: Callable[[BaseException], Retryable | None],
                       rng: Callable[[], Rng], what: str,
                       scrub: Callable[[str], str] = lambda s: s) -> T:
    """Run ``call`` until it succeeds, a failure is not retryable, or attempts run out.

    Failures that ``classify`` does not call retryable propagate unchanged (the adapter turns
    them into :class:`ModelError` or :class:`~limbo.base.errors.UsageError`); exhausting the
    attempts raises :class:`ModelError` naming the last failure."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except Exception as exc:  # classified just below
            verdict = classify(exc)
            if verdict is None:
                raise
            if attempt >= policy.max_attempts:
                raise ModelError(scrub(f"{what}: gave up after {plural(attempt, 'attempt')}; last error: "
                                       f"{verdict.reason}")) from None
            wait = policy.delay(attempt, rng(), verdict.retry_after_s)
            log.warning("%s: %s; retry %d/%d in %.2fs", what, scrub(verdict.reason), attempt,
                        policy.max_attempts - 1, wait)
            await policy.sleep(wait)


def describe(exc: BaseException) -> str:
    """A short, secret-free description of a failure (type, status, provider code)."""
    parts: list[Any] = [type(exc).__name__]
    status = getattr(exc, "status_code", None)
    if status is not None:
        parts.append(f"HTTP {status}")
    message = getattr(exc, "message", None) or str(exc)
    if message:
        parts.append(str(message)[:300])
    return ": ".join(str(p) for p in parts)
