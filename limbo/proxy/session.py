"""One proxied episode: every call the agent makes, on its way to the upstream and back.

A call to a declared read is forwarded (and, once after a ``stale_readback``, answered without
the focal write's effect). A call to a declared write is labelled like a sandbox call (its
attempt: ``original``, then ``reissue-n`` for the same tool and arguments), journaled as an
``intent`` (synced) before it is forwarded and as an ``ack`` before its answer goes back; the
first call to the focal tool gets the fault instead (:mod:`limbo.proxy.inject`). A call to a
tool the world file does not declare is forwarded and logged, but is in no ledger. Events name
a declared tool by its declared name (``<service>_<op>``, as the ledger and the cell's focal
write do), whatever the upstream calls it. ``finish`` is LIMBO's own: it takes the agent's
report and ends the episode.

The proxy never retries a write on its own: each call of the agent reaches the upstream at most
once, and the only extra deliveries are the fault's own (``redelivery``'s copy; a late commit's
one delivery after the timeout).

The episode *ends* when the agent finishes or goes (:meth:`Session.end`): a call held for its
timeout is answered at once, and a call after the end is refused, never forwarded (it could not
be in the record). A call the agent cancels (``stop``) stops being held; a write already on its
way to the upstream is seen through — its answer is journaled whatever the agent does.

The event log (the agent's calls and results, the fault) is journaled once the answer is on its
way (:meth:`limbo.proxy.journal.Journal.defer`); the ledger entries at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from pydantic import ValidationError

from limbo.base.hashing import canonical_json, plain_json
from limbo.base.runtime import stopwatch
from limbo.harnesses.toolcalls import loggable, loggable_name
from limbo.proxy.declared import Catalog, DeclaredTool
from limbo.proxy.inject import inject, staled
from limbo.proxy.journal import Journal
from limbo.proxy.ledger import COMMITTED, REPLAYED, UNCERTAIN, Ledger
from limbo.proxy.plan import FaultPlan
from limbo.proxy.redact import redact
from limbo.proxy.shapes import payload, result_of
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.sim.results import ErrorKind, Result, error
from limbo.sim.tools import KEY_FIELD, FinishArgs

MAX_LOGGED_RESULT = 20_000
"""A result whose JSON is longer than this many characters is logged summarised."""
ARRIVAL = {COMMITTED: "committed", REPLAYED: "replayed", UNCERTAIN: "no_effect"}


class Session:
    """The calls of one episode, the journal they go to, and what the agent reported."""

    def __init__(self, catalog: Catalog, upstream: Upstream, plan: FaultPlan,
                 journal: Journal) -> None:
        self.catalog, self.upstream, self.plan, self.journal = catalog, upstream, plan, journal
        self.started = stopwatch()
        """When the agent could first call (the record's ``t`` = 0)."""
        self.ledger = Ledger(catalog)
        self.fired = False
        self.report: dict[str, Any] | None = None
        self.tool_calls = 0
        self.stale: tuple[str, DeclaredTool, dict[str, Any], float] | None = None
        """After ``stale_readback``: (service, focal tool, its arguments, when it was sent)."""
        self._requests = 0
        self._writes = 0
        self._seen: dict[str, int] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.ended = asyncio.Event()
        """The agent finished or went: held calls are answered, later ones refused."""
        self.answers_told = False
        """Whether the face serving the agent calls :meth:`answered` once each answer is on its
        way (over stdio); else a result's event line is journaled at the loop's next turn."""

    # -- the clock and the journal ------------------------------------------------------------

    def now(self) -> float:
        """Wall seconds since the agent could first call (the record's ``t``)."""
        return round(stopwatch() - self.started, 6)

    def emit(self, type_: str, **fields: Any) -> None:
        """One event of the record's event log, stamped now, journaled (without a sync) once
        the answer in hand is on its way — a call's with its result's, a result's when its
        answer has gone (:attr:`answers_told`), others at the loop's next turn; a field given
        as a function is computed then."""
        t = self.now()

        def entry() -> dict[str, Any]:
            return {"t": t, "type": type_,
                    **{k: v() if callable(v) else v for k, v in fields.items()}}

        self.journal.defer(entry, soon=type_ != "call" and (type_ != "result"
                                                            or not self.answers_told))

    def answered(self) -> None:
        """An answer to the agent is on its way: journal the event lines waiting for it."""
        self.journal.flush()

    def ledger_entry(self, entry: dict[str, Any], forwarding: bool = False) -> None:
        """One ledger entry: an ``intent`` (``forwarding``) on disk before the write is
        forwarded; the upstream's answer appended, and synced with the next one (its intent
        already holds the write: :mod:`limbo.proxy.journal`)."""
        self.journal.write(entry, sync=forwarding)
        self.ledger.apply(entry)

    # -- calls --------------------------------------------------------------------------------

    async def call(self, name: str, args: dict[str, Any], call_id: str,
                   stop: asyncio.Event | None = None) -> dict[str, Any]:
        """The answer (an MCP tool result's JSON) to one call of the agent (``stop``: set when
        the agent cancels it)."""
        if self.ended.is_set():
            return failure(error("not_available", "the episode is over (the agent finished): "
                                                  "limbo proxy forwards nothing more"))
        if name == "finish":
            return self._finish(args, call_id)
        self.tool_calls += 1
        tool = self.catalog.of(name)
        wire = self.catalog.wire_name(tool.name) if tool is not None else name
        keep = tool.write.effect if tool is not None and tool.write is not None else ()
        logged = tool.name if tool is not None else loggable_name(name)  # the ledger's names
        self.emit("call", id=call_id, tool=logged, args=lambda: loggable(redact(args, keep)))
        if tool is not None and tool.write is not None:
            request_id, attempt = self._label(tool, args)
            if not self.fired and tool.name == self.plan.focal:
                self.fired = True
                result = await inject(self, tool, wire, args, request_id, stop)
            else:
                result = await self.forward(tool, wire, args, request_id, attempt)
        else:
            result = await self._read(tool, wire, args)
        self._log_result(call_id, logged, result)
        return result

    async def hold(self, until: float, stop: asyncio.Event | None = None) -> None:
        """Wait until ``until`` (the record's ``t``), the end of the episode, or ``stop``."""
        remaining = until - self.now()
        if remaining <= 0 or self.ended.is_set() or (stop is not None and stop.is_set()):
            return
        waits = [asyncio.ensure_future(e.wait()) for e in (self.ended, stop) if e is not None]
        try:
            await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def end(self) -> None:
        """The agent finished or went: answer the held calls now, refuse later ones."""
        self.ended.set()

    def _label(self, tool: DeclaredTool, args: dict[str, Any]) -> tuple[str, str]:
        """The request id and attempt of a write (as the sandbox boundary labels them)."""
        self._requests += 1
        plain = {k: v for k, v in args.items() if k != KEY_FIELD}
        batch = tool.op.batch
        basis = batch.basis(plain) if batch is not None and batch.units in plain else plain
        fingerprint = canonical_json([tool.name, basis])
        n = self._seen.get(fingerprint, 0)
        self._seen[fingerprint] = n + 1
        return f"r{self._requests}", "original" if n == 0 else f"reissue-{n}"

    async def forward(self, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
                      attempt: str) -> dict[str, Any]:
        """Forward one write: ``intent`` (synced), the upstream's answer, ``ack``.
        Returns the upstream's result, or the failure the agent hears when it gave none."""
        return (await self.deliver(tool, wire, args, request_id, attempt))[1]

    async def deliver(self, tool: DeclaredTool, wire: str, args: dict[str, Any], request_id: str,
                      attempt: str) -> tuple[int, dict[str, Any]]:
        """:meth:`forward`, with the write's number in the ledger."""
        self._writes += 1
        n = self._writes
        plain = {k: v for k, v in args.items() if k != KEY_FIELD}
        key = args.get(KEY_FIELD) if isinstance(args.get(KEY_FIELD), str) else None
        assert tool.write is not None
        self.ledger_entry({"type": "intent", "n": n, "t": self.now(), "tool": tool.name,
                           "args": redact(plain, tool.write.effect), "key": key,
                           "attempt": attempt, "request_id": request_id}, forwarding=True)
        try:
            result = await self.upstream.call(wire, args)
        except UpstreamLost as exc:
            self.ledger_entry({"type": "lost", "n": n, "t": self.now(), "state": UNCERTAIN,
                               "why": str(exc)})
            return n, failure(lost(exc))
        self.ledger_entry(self.ledger.ack_entry(n, self.now(), payload(result)))
        return n, result

    async def _read(self, tool: DeclaredTool | None, wire: str, args: dict[str, Any]
                    ) -> dict[str, Any]:
        try:
            result = await self.upstream.call(wire, args)
        except UpstreamLost as exc:
            return failure(lost(exc))
        if self.stale is not None and tool is not None and tool.op.service == self.stale[0]:
            result = staled(self, result, tool)
        return result

    def _finish(self, args: dict[str, Any], call_id: str) -> dict[str, Any]:
        if self.report is not None:
            return failure(error("invalid_argument", "the task is already finished"))
        try:
            report = FinishArgs.model_validate(args).model_dump()
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(map(str, first["loc"])) or "(arguments)"
            return failure(error("invalid_argument", f"finish: {where}: {first['msg']}"))
        self.report = report
        self.emit("finish", id=call_id, report=report)
        self.end()
        return answer({"ok": True, "finished": True})

    def _log_result(self, call_id: str, name: str, result: dict[str, Any]) -> None:
        self.emit("result", id=call_id, tool=name, result=lambda: _logged(result))

    # -- background deliveries ----------------------------------------------------------------

    def later(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (a late or redelivered write) beside the calls; the episode waits for
        it before it is graded (:meth:`settle`)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def arrival(self, n: int, request_id: str, attempt: str, tool: str) -> None:
        """Log where a delivered-later write ``n`` landed (the sandbox's ``arrival`` event)."""
        self.emit("arrival", request_id=request_id, attempt=attempt, tool=tool,
                  outcome=ARRIVAL.get(self.ledger.writes[n].state, "no_effect"))

    @property
    def pending(self) -> int:
        return len(self._background)

    async def settle(self) -> None:
        """Wait for every late or redelivered write to land."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def abandon(self) -> None:
        """Stop waiting for writes still scheduled (a second stop signal): they are never
        forwarded, which the fault event's plan shows."""
        for task in list(self._background):
            task.cancel()


def _logged(result: dict[str, Any]) -> dict[str, Any]:
    """A result as the event log holds it (summarised past :data:`MAX_LOGGED_RESULT`, as its
    text blocks measure it: a JSON answer's text is its JSON)."""
    body = payload(result)
    content = result.get("content")
    size = sum(len(t) for c in (content if isinstance(content, list) else ())
               if isinstance(c, dict) and isinstance(t := c.get("text"), str))
    if size > MAX_LOGGED_RESULT or (not size and len(text := plain_json(body)) >
                                    MAX_LOGGED_RESULT):
        text = plain_json(body)
        body = {"ok": body.get("ok", False), "_truncated": text[:200], "_chars": len(text)}
    return body


def answer(body: Result) -> dict[str, Any]:
    """A LIMBO result as the MCP result the agent gets (JSON text, as the sandbox sends it)."""
    return result_of(body, not body.get("ok"))


def failure(body: Result) -> dict[str, Any]:
    return result_of(body, True)


def lost(exc: UpstreamLost) -> Result:
    """What the agent hears when the upstream gave no answer."""
    kind: ErrorKind = "timeout" if "Timeout" in str(exc) else "connection_reset"
    return error(kind, f"the upstream MCP server did not answer ({str(exc)[:200]}); the request "
                       f"may or may not have been processed")
