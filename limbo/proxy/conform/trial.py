"""One check of ``limbo conform`` as one proxied episode: its calls go through the proxy's own
session, so the durable journal and the ledger of acknowledged writes are kept exactly as for an
agent's episode, and its record lands in the run directory where ``limbo show``, ``status`` and
``report`` read it.

The cell names the check: harness ``conform``, template ``p<N>_<property>``, the tool as the
focal write, the fault the check applies (``timeout_post`` for property 3, else ``none``). The
verdict and its evidence ride in the record's ``runtime.proxy.conform``.

The session reaches the server through :class:`Wire`, which hears every answer the server gave —
also the one a ``timeout_post`` keeps from the client — and goes to whatever connection the run
holds now, so a restart of the server (property 5) needs nothing of the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from limbo.base.hashing import plain_json
from limbo.base.runtime import now_iso, stopwatch
from limbo.proxy.conform.observe import Call, Observer
from limbo.proxy.conform.subjects import OWN_SERVICE, Subject
from limbo.proxy.declared import Catalog
from limbo.proxy.journal import Journal, journal_path, read_journal
from limbo.proxy.ledger import REPLAY_FLAG
from limbo.proxy.plan import FaultPlan, modes
from limbo.proxy.record import append, build
from limbo.proxy.session import Session
from limbo.proxy.shapes import payload
from limbo.proxy.upstream import Upstream, UpstreamLost, UpstreamSpec
from limbo.sim.cell import Cell
from limbo.sim.config import Timing, dumped
from limbo.sim.tools import KEY_FIELD

HARNESS = MODEL = "conform"
SHOWN = 300
"""How many characters of an answer the evidence keeps."""


@dataclass
class Conformance:
    """What every check of one run shares: the server, the ledger's catalog, the observer."""

    catalog: Catalog
    spec: UpstreamSpec
    out: Path
    scale: float
    scrub: Any
    nonce: str
    observer: Observer
    upstream: Upstream
    """The connection now (a restart replaces it)."""
    restart: Callable[[], Awaitable[str]]
    """Restart the server (or, over HTTP, open a new session); what was done."""
    key_delay: float = 0.0
    """Wall seconds property 5 waits before its repeat (a key lease shorter fails it)."""
    episodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """What one call got: ``ok`` (a success), the answer as JSON, ``lost`` (no answer)."""

    ok: bool
    body: dict[str, Any]
    lost: bool = False

    def same(self, other: Answer) -> bool:
        """The same answer, apart from a replay flag the server adds to a repeat."""
        strip = (REPLAY_FLAG, "replayed")
        return ({k: v for k, v in self.body.items() if k not in strip}
                == {k: v for k, v in other.body.items() if k not in strip})


class Wire:
    """The upstream as a check's session reaches it: the run's connection of the moment, every
    answer noted (a lost call too)."""

    def __init__(self, run: Conformance) -> None:
        self.run = run
        self.lost: list[str] = []
        self.heard: list[Answer] = []
        """The server's answers, in the order they came (a dropped one included)."""

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.run.upstream.call(name, args)
        except UpstreamLost as exc:
            self.lost.append(str(exc))
            raise
        body = payload(result)
        self.heard.append(Answer(bool(body.get("ok")), body))
        return result

    async def read(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.run.upstream.read(name, args)


class Trial:
    """One check: its session, its calls (the evidence), its record once :meth:`close`d."""

    def __init__(self, run: Conformance, subject: Subject, number: int, name: str,
                 mode: str = "none") -> None:
        self.run, self.subject = run, subject
        self.plan = FaultPlan(mode, subject.name, modes()[mode], run.scale, 0)
        service = subject.tool.op.service if subject.tool is not None else OWN_SERVICE
        self.cell = Cell(model=MODEL, harness=HARNESS, fault=mode, service=service,
                         template=f"p{number}_{name}", focal_write=subject.name,
                         timing=Timing(client_timeout_s=self.plan.client_timeout_s),
                         world=run.catalog.identity)
        self.path = journal_path(run.out, self.cell.episode_id)
        self.journal = Journal(self.path, run.scrub)
        self.wire = Wire(run)
        # the session reaches its upstream through call() alone (and the faults through the
        # session): a Wire stands in for the Upstream without the proxy's code changing
        self.session = Session(run.catalog, cast(Upstream, self.wire), self.plan, self.journal)
        self.started = stopwatch()
        self.calls: list[dict[str, Any]] = []
        self.journal.write({
            "type": "start", "t": 0.0, "episode_id": self.cell.episode_id,
            "cell": self.cell.public(), "timing": dumped(self.cell.timing),
            "started_at": now_iso(),
            "proxy": {"world": run.catalog.identity, "upstream": run.spec.describe(),
                      "time_scale": run.scale, "fault": mode, "focal_write": subject.name}})

    def key(self, check: str) -> str:
        """A fresh idempotency key for this run, tool and use."""
        return f"conform-{self.run.nonce}-{self.subject.wire}-{check}"[:200]

    async def call(self, args: dict[str, Any], key: str | None = None,
                   subject: Subject | None = None) -> Answer:
        """Call the tool (``subject``: another one) with ``args`` and ``key``."""
        tool = subject or self.subject
        sent = {**args, KEY_FIELD: key} if key is not None else dict(args)
        lost = len(self.wire.lost)
        n = len(self.calls) + 1
        result = await self.session.call(tool.wire, sent, f"c{n}")
        body = payload(result)
        answer = Answer(bool(body.get("ok")), body, len(self.wire.lost) > lost)
        self.calls.append({"tool": tool.wire, "key": key, "args": args, "ok": answer.ok,
                           **({"lost": True} if answer.lost else {}),
                           "answer": plain_json(body)[:SHOWN]})
        return answer

    async def together(self, args: dict[str, Any], key: str, n: int) -> list[Answer]:
        """``n`` calls with one key at once."""
        return list(await asyncio.gather(*(self.call(args, key) for _ in range(n))))

    async def look(self, calls: list[Call]) -> Any:
        return await self.run.observer.look(calls)

    async def close(self, verdict: dict[str, Any]) -> str:
        """Record the check (its verdict in the record's ``runtime``); its episode id."""
        await self.session.settle()
        self.session.end()
        self.journal.close()
        record = build(read_journal(self.path), self.run.catalog, stopwatch() - self.started,
                       ("finished", None), {"conform": verdict})
        append(self.run.out, record, self.run.scrub)
        marked = Journal(self.path, self.run.scrub, new=False)
        marked.write({"type": "recorded", "at": now_iso()}, sync=True)
        marked.close()
        self.run.episodes.append(self.cell.episode_id)
        return self.cell.episode_id


def shown(answer: Answer) -> str:
    """An answer as the evidence quotes it."""
    return plain_json(answer.body)[:SHOWN]
