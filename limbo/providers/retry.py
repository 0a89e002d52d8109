"""Our retries for provider calls: bounded exponential backoff with seeded jitter.

The official SDKs retry on their own by default; we switch that off (``max_retries=0``) so
there is exactly one retry policy, it is bounded, and its jitter comes from the cell's seed
(``limbo.base.rng.generator(seed, "provider.retry")``) rather than global randomness. A server's
``Retry-After`` (or OpenAI's ``retry-after-ms``) wins over the computed delay, up to a cap.

Two budgets, because two kinds of failure say different things. A *failure* (a 500, a timeout,
a dropped connection, a truncated stream) says the call went wrong: it spends one of
``max_attempts``. A *refusal* (a 429, an Anthropic 529 "overloaded", a 503 that says when to
come back) says the call was not taken, yet: the provider is busy, not broken. Counting
refusals as attempts let a call that was unlucky at a busy endpoint — refused five times in a
row while other calls took the free slots — end its episode as ``model_error`` although nothing
failed. So refusals spend a budget of their own, the time waited after them
(``max_refused_s``), each counted as at least ``min_refusal_charge_s``, so that a server that
refuses forever, even with ``Retry-After: 0``, still ends the call.

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
    refused: bool = False
    """The provider did not take the call (rate limited, overloaded): it spends the refusal
    budget, not an attempt."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    """Calls that may fail (refusals not counted)."""
    base_s: float = 1.0
    cap_s: float = 30.0
    max_retry_after_s: float = 120.0
    max_refused_s: float = 300.0
    """The longest a call waits, in total, after refusals before it gives up."""
    min_refusal_charge_s: float = 1.0
    """What a refusal spends of ``max_refused_s`` at least, however short its wait."""
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
    """Run ``call`` until it succeeds, a failure is not retryable, or a budget runs out: the
    attempts (failures) or the time waited after refusals (see the module's docstring).

    Failures that ``classify`` does not call retryable propagate unchanged (the adapter turns
    them into :class:`ModelError` or :class:`~limbo.base.errors.UsageError`); running out
    raises :class:`ModelError` naming the last failure."""
    spent = _Spent()
    while True:
        try:
            return await call()
        except Exception as exc:  # classified just below
            verdict = classify(exc)
            if verdict is None:
                raise
            wait = spent.next_wait(verdict, policy, rng)
            if wait is None:
                raise ModelError(scrub(f"{what}: gave up {spent.why(verdict, policy)}; last "
                                       f"error: {verdict.reason}")) from None
            log.warning("%s: %s; retry in %.2fs, after %s", what, scrub(verdict.reason), wait,
                        spent.told(policy))
            await policy.sleep(wait)


@dataclass
class _Spent:
    """What one call has spent of its two budgets."""

    failures: int = 0
    refusals: int = 0
    refused_s: float = 0.0

    def next_wait(self, verdict: Retryable, policy: RetryPolicy,
                  rng: Callable[[], Rng]) -> float | None:
        """The wait before the next try after ``verdict``, or ``None`` when its budget is
        spent."""
        if not verdict.refused:
            self.failures += 1
            if self.failures >= policy.max_attempts:
                return None
            return policy.delay(self.failures, rng(), verdict.retry_after_s)
        self.refusals += 1
        wait = policy.delay(self.refusals, rng(), verdict.retry_after_s)
        charge = max(wait, policy.min_refusal_charge_s)
        if self.refused_s + charge > policy.max_refused_s:
            return None
        self.refused_s += charge
        return wait

    def why(self, last: Retryable, policy: RetryPolicy) -> str:
        """The budget that ran out, in words that are the same for every call it ends (a run
        stops after a streak of episodes that failed with the same cause)."""
        if last.refused:
            return f"when refused for {policy.max_refused_s:g} s"
        return f"after {plural(policy.max_attempts, 'attempt')}"

    def told(self, policy: RetryPolicy) -> str:
        """What was spent so far, for the log."""
        said = [plural(self.failures, "attempt")] if self.failures else []
        if self.refusals:
            said.append(f"{plural(self.refusals, 'refusal')} ({self.refused_s:g} of "
                        f"{policy.max_refused_s:g} s waited)")
        return ", ".join(said) or "no attempt"


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
