"""The adapter boundary: whatever an adapter does, its episode ends in a record.

A model adapter is somebody else's code, and a model's reply is somebody else's data. Between
them and the harness stands :class:`Isolated`, which

- turns anything the adapter raises — ``SystemExit``, a ``KeyboardInterrupt`` or a
  ``CancelledError`` of its own, any exception — into an :class:`AdapterFailure` naming the
  adapter (the episode ends as ``infra_error``). Three things pass unchanged: a
  :class:`~limbo.base.errors.ModelError` (the provider failed after retries: ``model_error``), a
  :class:`~limbo.base.errors.UsageError` (the user must fix something, e.g. a rejected key: the run
  stops), and the user's own Ctrl-C (told apart by :func:`limbo.base.interrupts.from_user`). The
  cancellation of the episode itself (its ``--episode-timeout``) passes through as well;
- refuses a turn that is not a :class:`ModelTurn` (from any adapter but LIMBO's own reference
  policies, see :attr:`ModelAdapter.trusted`), or whose usage is not token counts that are
  integers >= 0 and a cost that is a finite amount >= 0 (``infra_error``: accounting we cannot
  trust), and a turn with neither text nor tool calls (``model_error``: the model said nothing,
  which is not the agent deciding to finish);
- replaces lone surrogates in what the model said (text, tool names, ids and arguments) with
  U+FFFD, so that every record is valid UTF-8. (Non-finite numbers in arguments are refused
  further in, by the tool boundary, as ``invalid_argument``.)
- prices a turn whose usage spent tokens without a ``cost_usd`` from the adapter class's
  prices, or marks its cost unknown (``None``), never free;
- bounds :meth:`ModelAdapter.aclose` to :data:`ACLOSE_TIMEOUT_S` and reports its failure.

:func:`drive` does the same for the harness that carries the adapter: whatever the loop raises
(the adapter's failure, a provider's, the wall-clock limit, a bug) ends it as a
:class:`~limbo.episode.harness.LoopResult` with a termination from the closed set.

An adapter that blocks the event loop (a synchronous call that never returns) or that swallows
its cancellation cannot be stopped from inside the process: such an adapter needs timeouts of
its own.
"""

from __future__ import annotations

import asyncio
import math
import traceback
from collections.abc import Callable
from typing import Any

from limbo.base.errors import InfraError, ModelError, UsageError
from limbo.base.interrupts import from_user
from limbo.episode.harness import Harness, LoopResult
from limbo.episode.models import (
    EpisodeContext,
    Message,
    ModelAdapter,
    ModelTurn,
    ToolCall,
    ToolDef,
    is_utf8,
)
from limbo.log.records import Usage
from limbo.sim.events import Termination

ACLOSE_TIMEOUT_S = 30.0
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")


class AdapterFailure(InfraError):
    """The adapter raised, or returned something that is not a valid turn."""


def being_cancelled() -> bool:
    """Whether the running task has been asked to stop (a timeout, a shutdown) — as opposed
    to some code raising ``CancelledError`` on its own."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def where(exc: BaseException) -> str:
    """``Type: message @ file:line`` (file name, not path: the text must not depend on where
    the code is installed)."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" @ {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{at}"


def escapes(exc: BaseException) -> bool:
    """The exceptions no boundary may swallow: the user's Ctrl-C (not a ``KeyboardInterrupt``
    some code raised itself, :mod:`limbo.base.interrupts`), a :class:`UsageError`, and the
    cancellation of the running task."""
    if isinstance(exc, UsageError):
        return True
    if isinstance(exc, KeyboardInterrupt):
        return from_user()
    return isinstance(exc, asyncio.CancelledError) and being_cancelled()


def spec_of(adapter: Any) -> str:
    try:
        return str(adapter.spec)
    except Exception:  # noqa: BLE001 - a broken adapter still gets a name
        return type(adapter).__name__


class Isolated(ModelAdapter):
    """``inner`` behind the adapter boundary (see the module docstring)."""

    def __init__(self, inner: ModelAdapter, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or spec_of(inner)
        self.check = not getattr(type(inner), "trusted", False)
        self.provider = getattr(inner, "provider", "")  # type: ignore[misc]
        self.model = getattr(inner, "model", "")
        self.params = getattr(inner, "params", {})
        self._price: dict[str, float] | None = None
        self._price_asked = False

    @classmethod
    def made(cls, maker: Callable[[], ModelAdapter], name: str) -> Isolated:
        """The adapter ``maker`` makes, behind the boundary; failing to make it is the
        episode's :class:`AdapterFailure` (a user's error or interrupt escapes)."""
        try:
            inner = maker()
        except BaseException as exc:
            if escapes(exc):
                raise
            raise AdapterFailure(f"adapter {name} could not be created: {where(exc)}") from None
        return cls(inner, name)

    @property
    def spec(self) -> str:
        return self.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       ctx: EpisodeContext) -> ModelTurn:
        try:
            turn = await self.inner.generate(messages, tools, ctx)
        except BaseException as exc:
            if escapes(exc) or isinstance(exc, ModelError):
                raise
            raise AdapterFailure(f"adapter {self.name} raised {where(exc)}") from None
        if not self.check:
            return turn
        return self._priced(checked(turn, self.name))

    def _priced(self, turn: ModelTurn) -> ModelTurn:
        """A turn that spent tokens without saying what they cost is priced from the adapter
        class's :meth:`~ModelAdapter.price_per_mtok`, or marked unknown (``None``): an adapter
        that leaves ``cost_usd`` at its default must not read as free."""
        usage = turn.usage
        if "cost_usd" in usage.model_fields_set or not (usage.input_tokens or usage.output_tokens):
            return turn
        if not self._price_asked:
            self._price_asked = True
            try:
                self._price = type(self.inner).price_per_mtok(self.model, self.params)
            except Exception:  # noqa: BLE001 - a broken price method prices nothing
                self._price = None
        price, cost = self._price, None
        if price is not None:
            cached = usage.cached_input_tokens
            cost = ((usage.input_tokens - cached) * price["input"] + cached * price.get(
                "cached_input", price["input"]) + usage.output_tokens * price["output"]) / 1e6
        return turn.model_copy(update={"usage": usage.model_copy(update={"cost_usd": cost})})

    async def aclose(self) -> None:
        problem = await self.close()
        if problem is not None:
            raise AdapterFailure(problem)

    async def close(self) -> str | None:
        """Close the adapter; what went wrong, or ``None``."""
        if type(self.inner).aclose is ModelAdapter.aclose:
            return None  # nothing to close
        try:
            # In this task, not a new one: a SystemExit raised in a task of its own would
            # escape through the event loop.
            async with asyncio.timeout(ACLOSE_TIMEOUT_S) as limit:
                await self.inner.aclose()
        except TimeoutError:
            if limit.expired():
                return f"adapter {self.name}: aclose() did not return within {ACLOSE_TIMEOUT_S:g}s"
            return f"adapter {self.name}: aclose() raised TimeoutError"
        except BaseException as exc:
            if escapes(exc):
                raise
            return f"adapter {self.name}: aclose() raised {where(exc)}"
        return None


def checked(turn: Any, name: str) -> ModelTurn:
    """``turn`` if it is a valid turn (cleaned of lone surrogates), else the failure. It runs
    on every model turn of every grid, so the common case — a valid turn in ASCII — is kept to
    a few inline checks (``type(...) is`` before ``isinstance``, which on a pydantic model goes
    through ``ABCMeta``)."""
    if type(turn) is not ModelTurn and not isinstance(turn, ModelTurn):
        raise AdapterFailure(f"adapter {name} returned a {type(turn).__name__}, not a ModelTurn")
    _check_usage(turn.usage, name)
    text, calls = turn.text, turn.tool_calls
    if text is not None and type(text) is not str and not isinstance(text, str):
        raise AdapterFailure(f"adapter {name} returned text of type {type(text).__name__}")
    if type(calls) is not list and not isinstance(calls, list):
        raise AdapterFailure(f"adapter {name} returned tool_calls of type {type(calls).__name__}")
    dirty = text is not None and not text.isascii() and _lone(text)
    for call in calls:
        dirty = _check_call(call, name) or dirty
    if not calls and not (text and text.strip()):
        raise ModelError(f"{name} returned an empty turn (no text and no tool calls)")
    if dirty:
        return ModelTurn(text=clean(text), usage=turn.usage,
                         tool_calls=[ToolCall(id=clean(c.id), name=clean(c.name),
                                              arguments=clean(c.arguments)) for c in calls])
    return turn


def _check_call(call: Any, name: str) -> bool:
    """Refuse a call that is not a :class:`ToolCall`; whether it holds a lone surrogate."""
    if type(call) is not ToolCall and not isinstance(call, ToolCall):
        raise AdapterFailure(f"adapter {name} returned tool_calls that are not ToolCalls")
    ident, tool, args = call.id, call.name, call.arguments
    if not (isinstance(ident, str) and isinstance(tool, str)):
        raise AdapterFailure(f"adapter {name} returned a tool call whose id or name is not text")
    if not (ident.isascii() and tool.isascii()) and (_lone(ident) or _lone(tool)):
        return True
    return _dirty(args)


def _check_usage(usage: Any, name: str) -> None:
    if type(usage) is not Usage and not isinstance(usage, Usage):
        raise AdapterFailure(f"adapter {name} returned usage of type {type(usage).__name__}")
    i, o, c, cost = usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.cost_usd
    if type(i) is int and type(o) is int and type(c) is int and i >= 0 and o >= 0 and c >= 0 and (
            cost is None or (type(cost) in (int, float) and 0 <= cost < math.inf)):
        return
    for field, value in zip(TOKEN_FIELDS, (i, o, c), strict=True):
        if type(value) is not int or value < 0:
            raise AdapterFailure(f"adapter {name} reported {field}={value!r}; token counts "
                                 f"must be integers >= 0")
    raise AdapterFailure(f"adapter {name} reported cost_usd={cost!r}; a cost must be a "
                         f"finite amount >= 0, or None when unknown")


def _lone(text: str) -> bool:
    return not is_utf8(text)


def _dirty(value: Any) -> bool:
    """Whether ``value`` holds a lone surrogate anywhere. Text that is ASCII (nearly all of
    it) is cleared by one C-level check, and the leaves of a dict or list are checked inline."""
    if isinstance(value, str):
        return not value.isascii() and _lone(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not key.isascii() and _lone(key):
                return True
            if isinstance(item, str):
                if not item.isascii() and _lone(item):
                    return True
            elif isinstance(item, dict | list) and _dirty(item):
                return True
        return False
    if isinstance(value, list):
        return any(_dirty(item) for item in value if isinstance(item, str | dict | list))
    return False


def clean(value: Any) -> Any:
    """``value`` with lone surrogates replaced by U+FFFD (a surrogate pair becomes its
    character), recursively."""
    if isinstance(value, str):
        if not _dirty(value):
            return value
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


async def drive(harness: Harness, timeout: float | None) -> LoopResult:
    """Start and run ``harness`` within ``timeout`` wall-clock seconds; how it ended."""
    try:
        async with asyncio.timeout(timeout) as limit:
            await harness.start()
            return await harness.run()
    except TimeoutError as exc:
        if limit.expired():
            return _stop(harness, "timeout", f"the episode ran past --episode-timeout "
                                             f"{timeout:g}s (wall clock)")
        return _stop(harness, "infra_error", where(exc))
    except ModelError as exc:
        return _stop(harness, "model_error", str(exc))
    except AdapterFailure as exc:
        return _stop(harness, "infra_error", str(exc))
    except BaseException as exc:
        if escapes(exc):
            raise
        return _stop(harness, "infra_error", where(exc))


def _stop(harness: Harness, reason: Termination, detail: str) -> LoopResult:
    """``harness.stop``, or a bare result when the harness cannot even stop."""
    try:
        return harness.stop(reason, detail)
    except Exception as exc:  # noqa: BLE001 - a broken harness still ends in a record
        return LoopResult(termination="infra_error", reason=f"{detail}; then stop() raised "
                                                            f"{where(exc)}")
