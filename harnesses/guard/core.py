"""The action guard: seven checks, in order, between a caller and its tools.

1. allowlist, then validation and coercion of the arguments;
2. authorisation of the caller for the tool — before any key is looked at, on every call, so a
   refused caller learns nothing about anyone's earlier result;
3. an idempotency key for every write: the caller's own, or one derived from (caller, tool,
   canonical arguments); keys live in the caller's scope;
4. the key is bound to its tool and arguments: reuse with others is a conflict, never a
   replay; a definite failure releases the key, an ambiguous one keeps it;
5. identical calls in flight at the same time share one execution;
6. a repeat of a write whose earlier attempt failed ambiguously is passed on with its key where
   the service honours keys, and otherwise read back first: a visible effect is served as a
   receipt, a partly visible batch is cut to its missing rows, no read path means forward and
   say so;
7. every write returns a receipt, and every decision is logged.

The steps are written once, as a generator that *yields* what it needs from the outside world
(run the policy, run the tool, wait for a shared execution) and receives the answer. Two small
drivers feed it: :meth:`Guard.call` awaits what needs awaiting (async tools and policies),
:meth:`Guard.call_sync` calls straight through. So sync and async hosts get the same logic,
and a sync host (like LIMBO's tool layer, whose clock is a simulation) never needs a loop.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, replace
from typing import Any

from limbo.harnesses.guard.allowlist import Args, Tool
from limbo.harnesses.guard.drive import CallNeed, JoinNeed, Slot, Steps, advance, settle_sync
from limbo.harnesses.guard.receipts import (
    Decision,
    GuardError,
    GuardResult,
    GuardUsageError,
    Outcome,
    Receipt,
    ToolFailure,
    Verification,
)
from limbo.harnesses.guard.schema import Invalid, check_key, derived_key, fingerprint, validate
from limbo.harnesses.guard.stores import KeyStore, MemoryKeyStore

Policy = Callable[[str, str, Args], bool | Awaitable[bool]]
"""``policy(caller, tool, args)``: exactly ``True`` allows; anything else, or raising, refuses."""


def default_exception_outcome(exc: BaseException) -> Outcome | None:
    """How an exception a tool raised is read: timeouts and connection errors may have acted
    (ambiguous); anything unexpected returns ``None`` — the guard keeps the key as ambiguous
    and re-raises, since a bug is not an outcome."""
    if isinstance(exc, ToolFailure):
        return "ambiguous" if exc.ambiguous else "definite"
    if isinstance(exc, TimeoutError | ConnectionError):
        return "ambiguous"
    return None


class _CallLog:
    """The decisions of one call; each is also handed to the guard's log at once."""

    def __init__(self, guard: Guard, caller: str, tool: str) -> None:
        self.guard, self.caller, self.tool = guard, caller, tool
        self.key: str | None = None
        self.items: list[Decision] = []

    def note(self, step: int, action: str, **detail: Any) -> None:
        decision = Decision(step, action, self.caller, self.tool, self.key, detail)
        self.items.append(decision)
        self.guard._record(decision)

    def refuse(self, step: int, kind: Any, message: str, **detail: Any) -> GuardResult:
        self.note(step, kind, **detail)
        return GuardResult(False, error=GuardError(kind, message), decisions=tuple(self.items))

    def done(self, ok: bool, value: Any, receipt: Receipt, error: GuardError | None = None
             ) -> GuardResult:
        return GuardResult(ok, value, error, receipt, tuple(self.items))


class Guard:
    """Guards a set of tools for any number of callers.

    ``authorize`` — the policy (sync or async); ``store`` — the key store (in memory by
    default); ``clock`` — seconds for key expiry and claim leases (``None``: nothing expires);
    ``on_decision`` — called with each :class:`Decision` as it is made (also kept in
    :attr:`decisions`); ``exception_outcome`` — how raised exceptions are classified.
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        authorize: Policy,
        store: KeyStore | None = None,
        clock: Callable[[], float] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        exception_outcome: Callable[[BaseException], Outcome | None] = default_exception_outcome,
        keep_decisions: int = 10_000,
    ) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)
        self.authorize = authorize
        self.store: KeyStore = store if store is not None else MemoryKeyStore()
        self.clock = clock
        self.on_decision = on_decision
        self.exception_outcome = exception_outcome
        self.decisions: deque[Decision] = deque(maxlen=keep_decisions)
        self._inflight: dict[tuple[str, str], Slot] = {}

    # -- declaring tools ------------------------------------------------------------------

    def add(self, tool: Tool) -> Tool:
        """Put ``tool`` on the allowlist."""
        if tool.name in self.tools:
            raise GuardUsageError(f"tool {tool.name!r} is declared twice")
        self.tools[tool.name] = tool
        return tool

    def tool(self, name: str | None = None, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: declare a function as a tool (``options`` as for :class:`Tool`)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add(Tool(name or fn.__name__, fn, **options))
            return fn

        return deco

    # -- calling ----------------------------------------------------------------------------

    async def call(self, caller: str, tool: str, args: Any = None, *, key: str | None = None
                   ) -> GuardResult:
        """Run one call through the seven steps (async tools and policies are awaited)."""
        steps = self._steps(caller, tool, {} if args is None else args, key)
        reply: Any = None
        thrown: BaseException | None = None
        while True:
            done, need = advance(steps, reply, thrown)
            if done:
                return need  # type: ignore[no-any-return]
            reply, thrown = None, None
            try:
                if isinstance(need, JoinNeed):
                    await need.slot.event.wait()
                    reply = need.slot
                else:
                    out = need.fn(*need.args, **need.kwargs)
                    reply = await out if inspect.isawaitable(out) else out
            except BaseException as exc:  # noqa: BLE001 - handed to the steps, which re-raise
                thrown = exc

    def call_sync(self, caller: str, tool: str, args: Any = None, *, key: str | None = None
                  ) -> GuardResult:
        """As :meth:`call`, for sync hosts. An async tool or policy is run on a fresh event
        loop; inside a running loop that is impossible and raises :class:`GuardUsageError`."""
        steps = self._steps(caller, tool, {} if args is None else args, key)
        reply: Any = None
        thrown: BaseException | None = None
        while True:
            done, need = advance(steps, reply, thrown)
            if done:
                return need  # type: ignore[no-any-return]
            reply, thrown = None, None
            try:
                if isinstance(need, JoinNeed):
                    reply = need.slot if need.slot.done else None
                else:
                    reply = settle_sync(need.fn(*need.args, **need.kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the steps, which re-raise
                thrown = exc

    def bind(self, caller: str) -> BoundGuard:
        """A handle that calls tools as ``caller``."""
        return BoundGuard(self, caller)

    # -- the seven steps ----------------------------------------------------------------------

    def _now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    def _record(self, decision: Decision) -> None:
        self.decisions.append(decision)
        if self.on_decision is not None:
            self.on_decision(decision)

    def _steps(self, caller: str, name: str, raw: Any, key: str | None) -> Steps:
        log = _CallLog(self, caller, name[:200])
        tool = self.tools.get(name)
        if tool is None:  # step 1: allowlist
            return log.refuse(1, "unknown_tool", f"unknown tool {name[:80]!r}; available: "
                              f"{', '.join(self.tools)}")
        try:  # step 1: validate and coerce
            args, own_key = self._validate(tool, raw, key)
        except Invalid as exc:
            return log.refuse(1, "invalid_arguments", f"{name}: {exc}")
        try:  # step 2: authorise, before any key is looked at
            allowed = yield CallNeed(self.authorize, (caller, name, dict(args)))
        except Exception as exc:  # noqa: BLE001 - a failing policy refuses (fail closed)
            allowed = exc
        if allowed is not True:
            reason = type(allowed).__name__ if isinstance(allowed, Exception) else "refused"
            return log.refuse(2, "forbidden", f"not authorised to call {name}", reason=reason)
        log.note(2, "authorised")
        if not tool.write:
            return (yield from self._read(tool, args, log))
        return (yield from self._keyed(tool, caller, args, own_key, log))

    def _validate(self, tool: Tool, raw: Any, key: str | None) -> tuple[Args, str | None]:
        assert tool.schema is not None
        args = validate(tool.schema, raw)
        own = args.pop(tool.key_param, None) if tool.key_param else None
        if key is not None and own is not None and key != own:
            raise Invalid("two different idempotency keys were given")
        own = key if own is None else own
        return args, (check_key(own) if own is not None else None)

    def _read(self, tool: Tool, args: Args, log: _CallLog) -> Steps:
        try:
            value = yield CallNeed(tool.fn, (), dict(args))
        except BaseException as exc:
            outcome = self.exception_outcome(exc)
            if outcome is None:
                raise
            log.note(7, f"read_{outcome}", error=type(exc).__name__)
            return GuardResult(False, error=GuardError("failed", str(exc), outcome == "ambiguous"),
                               decisions=tuple(log.items))
        outcome = tool.classify(value)
        if outcome != "ok":
            log.note(7, f"read_{outcome}")
            return GuardResult(False, value, GuardError("failed", "the read failed",
                                                        outcome == "ambiguous"),
                               decisions=tuple(log.items))
        return GuardResult(True, value, decisions=tuple(log.items))

    def _keyed(self, tool: Tool, caller: str, args: Args, own_key: str | None,
               log: _CallLog) -> Steps:
        """Steps 3–5: key, conflict/replay, sharing; then the write itself."""
        fp = fingerprint(tool.name, args)
        key = own_key if own_key is not None else derived_key(caller, tool.name, args)
        source = "caller" if own_key is not None else "derived"
        log.key = key
        log.note(3, "key", source=source)
        slot = self._inflight.get((caller, key))
        if slot is not None:  # step 5: identical call already running in this process
            if (slot.tool, slot.fp) != (tool.name, fp):
                return log.refuse(4, "conflict", _CONFLICT)
            joined = yield JoinNeed(slot)
            if joined is None:
                return log.refuse(5, "in_progress", _BUSY)
            if joined.exc is not None:
                raise joined.exc
            log.note(5, "shared")
            first = joined.result
            assert first is not None and first.receipt is not None
            return log.done(first.ok, first.value, replace(first.receipt, key_source=source,
                                                            shared=True, replayed=True), first.error)
        claim = self.store.claim(caller, key, tool.name, fp, self._now())
        if claim.verdict == "conflict":
            return log.refuse(4, "conflict", _CONFLICT)
        if claim.verdict == "busy":
            return log.refuse(5, "in_progress", _BUSY)
        receipt = Receipt(tool.name, args, key, source, "ok")  # type: ignore[arg-type]
        if claim.verdict == "replay":
            log.note(4, "replay", value_kept=claim.stored)
            return log.done(True, claim.value, replace(receipt, replayed=True))
        slot = Slot(tool.name, fp)
        self._inflight[(caller, key)] = slot
        try:
            result = yield from self._write(tool, caller, args, receipt, claim.verdict == "retry", log)
        except BaseException as exc:
            slot.settle(None, exc)
            raise
        else:
            slot.settle(result)
        finally:
            self._inflight.pop((caller, key), None)
        return result

    def _write(self, tool: Tool, caller: str, args: Args, receipt: Receipt, retry: bool,
               log: _CallLog) -> Steps:
        """Step 6 (on a retry after an ambiguous failure), then execute and settle the key."""
        key = receipt.key
        send = dict(args)
        honoured = tool.honours(args)
        if retry:
            log.note(4, "retry_after_ambiguous")
            if honoured:
                log.note(6, "forward_keyed", reason="the service deduplicates by key")
            elif tool.verify is None:
                log.note(6, "forward_unverified", reason="no read-back declared for this tool")
            else:
                check = yield from self._verify(tool, args)
                if check.visible:
                    self.store.complete(caller, key, check.value)
                    log.note(6, "receipt_from_readback", **check.detail)
                    return log.done(True, check.value, replace(receipt, replayed=True,
                                                               verified=True))
                if check.visible is None:
                    log.note(6, "forward_unverified", **check.detail)
                else:
                    receipt = replace(receipt, verified=False)
                    if check.missing and tool.narrow is not None:
                        send = tool.narrow(args, check.missing)
                        receipt = replace(receipt, forwarded_units=check.missing)
                    log.note(6, "forward_not_visible", missing=list(check.missing or ()),
                             **check.detail)
        if honoured and tool.key_param:
            send[tool.key_param] = key
        try:
            value = yield CallNeed(tool.fn, (), send)
        except BaseException as exc:
            outcome = self.exception_outcome(exc)
            self._settle_key(caller, key, outcome or "ambiguous", None, log,
                             error=type(exc).__name__)
            if outcome is None:
                raise
            return log.done(False, None, replace(receipt, outcome=outcome),
                            GuardError("failed", str(exc), outcome == "ambiguous"))
        outcome = tool.classify(value)
        self._settle_key(caller, key, outcome, value, log)
        error = None if outcome == "ok" else GuardError(
            "failed", f"{tool.name} failed ({outcome})", outcome == "ambiguous")
        return log.done(outcome == "ok", value, replace(receipt, outcome=outcome), error)

    def _verify(self, tool: Tool, args: Args) -> Generator[CallNeed, Any, Verification]:
        assert tool.verify is not None
        try:
            check = yield CallNeed(tool.verify, (dict(args),))
        except Exception as exc:  # noqa: BLE001 - a failed read-back just cannot tell
            return Verification(None, detail={"reason": f"read-back raised {type(exc).__name__}"})
        if not isinstance(check, Verification):
            raise GuardUsageError(f"verify for {tool.name} must return a Verification")
        return check

    def _settle_key(self, caller: str, key: str, outcome: Outcome, value: Any, log: _CallLog,
                    **detail: Any) -> None:
        """Step 4's second half: keep, release or complete the key after the attempt."""
        if outcome == "ok":
            self.store.complete(caller, key, value)
            log.note(7, "executed", **detail)
        elif outcome == "definite":
            self.store.release(caller, key)
            log.note(4, "release_key", reason="failed before acting", **detail)
        else:
            self.store.mark_ambiguous(caller, key)
            log.note(4, "keep_key", reason="may have acted", **detail)


_CONFLICT = "this idempotency key was already used with another tool or other arguments"
_BUSY = "a call with this idempotency key is still in progress elsewhere; its outcome is not known yet"


@dataclass(frozen=True)
class BoundGuard:
    """A guard with the caller filled in."""

    guard: Guard
    caller: str

    async def call(self, tool: str, args: Any = None, *, key: str | None = None) -> GuardResult:
        return await self.guard.call(self.caller, tool, args, key=key)

    def call_sync(self, tool: str, args: Any = None, *, key: str | None = None) -> GuardResult:
        return self.guard.call_sync(self.caller, tool, args, key=key)
