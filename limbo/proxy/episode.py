"""One proxied episode from start to record, and the recovery of one a crash left unrecorded.

Start: connect to the upstream, match its tools to the world file, pick the task and the fault
plan, open the journal (``start``), run the task's setup on the upstream (``task``), snapshot
what its reads list (``baseline``). Serve the agent until the episode ends (it finished, or
went). Then, while the proxy still serves and before the upstream is asked to stop, wait for
the writes still scheduled (a late commit, a redelivered copy) — a SIGINT/SIGTERM meanwhile
stops waiting and they are never sent — reconcile the writes their answers did not settle
against the upstream, build the record from the journal, append it, mark the journal
``recorded``. The record is thus written as soon as the agent is done, whatever the agent's
client does next (the ``mcp`` SDK's gives a stdio server two seconds, then SIGTERM).

Recovery (``limbo proxy --recover``): for each journal in the run directory without a record,
reconnect to the upstream, reconcile, and record the episode as ``infra_error`` (the proxy, not
the agent, failed), its ledger complete. The record is what says an episode is recorded: a
journal whose episode already has one (the proxy died between the two writes) is only marked,
never recorded twice.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from limbo.base.errors import UsageError
from limbo.base.runtime import now_iso, stopwatch
from limbo.log.records import EpisodeRecord
from limbo.proxy.declared import Catalog
from limbo.proxy.journal import Journal, journal_path, read_journal, unrecorded
from limbo.proxy.plan import FaultPlan, parse
from limbo.proxy.reconcile import Reconciler
from limbo.proxy.record import append, build, first, ledger_of
from limbo.proxy.serve import ProxyServer
from limbo.proxy.session import Session
from limbo.proxy.snapshot import Snapshot, take, task_reads
from limbo.proxy.task import Task, prepare, template
from limbo.proxy.upstream import (
    CALL_TIMEOUT_S,
    START_TIMEOUT_S,
    Upstream,
    UpstreamSpec,
    connect,
)
from limbo.sim.cell import Cell
from limbo.sim.config import Timing, dumped
from limbo.sim.tasks import plan_hash

HARNESS = "proxy"
"""The cell's harness: whatever agent talks to ``limbo proxy``."""


@dataclass(frozen=True)
class Options:
    catalog: Catalog
    upstream: UpstreamSpec
    out: Path
    fault: str
    task: str | None
    instance: int
    seed: int
    scale: float
    model: str
    port: int | None
    scrub: Any

    @property
    def call_timeout(self) -> float:
        """How long the proxy waits for the upstream's answer to a call (wall seconds)."""
        return CALL_TIMEOUT_S * self.scale

    def say(self, line: str) -> None:
        """One line on stderr, the upstream's secrets masked."""
        print(self.scrub(line), file=sys.stderr, flush=True)


async def run(opts: Options) -> EpisodeRecord:
    """Serve one episode and return its record (appended to ``opts.out``)."""
    started = stopwatch()
    records: list[EpisodeRecord] = []
    async with connect(opts.upstream, opts.call_timeout) as upstream:
        with upstream.waiting(START_TIMEOUT_S):
            session, prompt, offered, prompts = await _open(opts, upstream)
        server = ProxyServer(session, offered, prompts, prompt, opts.say)

        async def after() -> None:  # the agent is done; the upstream still runs
            extra = await _close(opts, session, upstream)
            session.journal.close()
            why = f"limbo proxy failed: {_why(server.failure)}" if server.failure else None
            records.append(_finish(opts, session.journal.path, started,
                                   ("infra_error" if why else "finished", why), extra))

        try:
            session.started = stopwatch()  # t = 0: the agent may call from now on
            await server.serve(opts.port, after)
        finally:
            session.journal.close()
    return records[0]


def _why(exc: BaseException | None) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


async def _open(opts: Options, upstream: Upstream
                ) -> tuple[Session, str, list[dict[str, Any]], list[str]]:
    """The episode up to its first call: the plan, the journal, the setup, the baseline (and
    what the upstream offers: its tools, its prompts' names). A failure before the agent could
    call leaves no journal (nothing the ledger must keep)."""
    offered = await upstream.listed("tools")
    prompts = await _prompt_names(opts, upstream)
    for warning in opts.catalog.bind(str(t.get("name")) for t in offered):
        opts.say(f"limbo proxy: warning: {warning}")
    t = template(opts.catalog, opts.task)
    plan = parse(opts.fault, opts.catalog, t.focal_writes, opts.seed, opts.scale)
    cell = _cell(opts, t.service, t.id, plan)
    _refuse_taken(opts.out, cell.episode_id)
    journal = Journal(journal_path(opts.out, cell.episode_id), opts.scrub)
    session = Session(opts.catalog, upstream, plan, journal)
    try:
        _start_entry(opts, session, cell, plan)
        task = await prepare(t, opts.instance, opts.catalog, upstream)
        _task_entry(session, task, opts.catalog, plan)
        before = await take(upstream, opts.catalog, task_reads(t, task.env, opts.catalog))
        journal.write({"type": "baseline", "t": 0.0, "reads": before.entry()})
    except BaseException:
        journal.close()
        journal.path.unlink(missing_ok=True)
        raise
    from limbo.proxy.status import write_manifest

    write_manifest(opts.out, cell, opts, "serving")
    opts.say(f"limbo proxy: episode {cell.episode_id}, fault {plan.mode} on {plan.focal}; "
             f"task: {task.prompt()}")
    return session, task.prompt(), offered, prompts


async def _prompt_names(opts: Options, upstream: Upstream) -> list[str]:
    """The names of the upstream's prompts; none, with a warning, when it fails to list them
    (its tools are what the episode needs)."""
    if "prompts" not in upstream.capabilities:
        return []
    try:
        return [str(p.get("name")) for p in await upstream.listed("prompts")]
    except UsageError as exc:
        opts.say(f"limbo proxy: warning: {exc}; the agent sees the task prompt only")
        return []


async def _close(opts: Options, session: Session, upstream: Upstream) -> dict[str, Any]:
    """After serving: the scheduled writes land, the writes in doubt are reconciled."""
    await _settle(opts, session)
    journal = session.journal
    reconciler = Reconciler(upstream, opts.catalog, session.ledger,
                            Snapshot.of(first(read_journal(journal.path), "baseline")))
    for entry in await reconciler.settle(session.now()):
        journal.write(entry, sync=True)
    _refuse_unreachable(reconciler, journal.path)
    return {"unattributed": await reconciler.unattributed()}


def _cell(opts: Options, service: str, template_id: str, plan: FaultPlan) -> Cell:
    timing = Timing(client_timeout_s=plan.client_timeout_s)
    return Cell(model=opts.model, harness=HARNESS, condition="vanilla", contract="native",
                fault=plan.mode, service=service, template=template_id, instance=opts.instance,
                focal_write=plan.focal, seed=opts.seed, timing=timing,
                world=opts.catalog.identity)


def _refuse_taken(out: Path, episode_id: str) -> None:
    from limbo.log.store import scan

    if episode_id in scan(out).ids:
        raise UsageError(f"{out} already holds episode {episode_id} (the same cell); use "
                         f"another --out, --seed or --instance")
    if journal_path(out, episode_id).exists():
        raise UsageError(f"{out} holds an unrecorded journal of episode {episode_id} (its "
                         f"proxy stopped before recording it): run the same command with "
                         f"--recover first")


def _start_entry(opts: Options, session: Session, cell: Cell, plan: FaultPlan) -> None:
    session.journal.write({
        "type": "start", "t": 0.0, "episode_id": cell.episode_id, "cell": cell.public(),
        "timing": dumped(cell.timing), "started_at": now_iso(),
        "proxy": {"world": opts.catalog.identity, "upstream": opts.upstream.describe(),
                  "time_scale": opts.scale, "fault": plan.mode, "focal_write": plan.focal}})


def _task_entry(session: Session, task: Task, catalog: Catalog, plan: FaultPlan) -> None:
    session.journal.write({
        "type": "task", "t": 0.0, "prompt": task.prompt(),
        "intents": task.intents(catalog), "plan_hash": plan_hash(task.template),
        "focal_write_class": task.write_class(catalog, plan.focal), "env": task.env})


async def _settle(opts: Options, session: Session) -> None:
    """Wait for the scheduled writes (a stop signal meanwhile abandons them)."""
    if session.pending:
        opts.say(f"limbo proxy: the episode ended; waiting for {session.pending} scheduled "
                 f"write(s) to be delivered (SIGINT/SIGTERM abandons them)")
    await session.settle()


def _finish(opts: Options, path: Path, started: float, termination: tuple[str, str | None],
            extra: dict[str, Any]) -> EpisodeRecord:
    from limbo.proxy.status import record_written

    record = build(read_journal(path), opts.catalog, stopwatch() - started, termination, extra)
    append(opts.out, record, opts.scrub)
    _mark(opts, path)
    record_written(opts.out, record)
    return record


def _mark(opts: Options, path: Path) -> None:
    """Journal that the episode is recorded (a hint for readers of the journal: what says so
    is the record, which ``--recover`` and ``limbo status`` look for first)."""
    with contextlib.suppress(OSError, UsageError):
        journal = Journal(path, opts.scrub, new=False)
        journal.write({"type": "recorded", "at": now_iso()}, sync=True)
        journal.close()


def _refuse_unreachable(reconciler: Reconciler, path: Path) -> None:
    """An upstream that cannot be read leaves writes in doubt: recording the episode now would
    grade a ledger that may lack effects, so it stays unrecorded for ``--recover``."""
    if reconciler.unreachable:
        raise UsageError(f"the upstream did not answer the reads that settle "
                         f"{len(reconciler.ledger.uncertain())} write(s) in doubt "
                         f"({reconciler.unreachable[0]}); the episode is left unrecorded in "
                         f"{path}: once the upstream answers again, run the same command with "
                         f"--recover")


async def recover(opts: Options) -> list[tuple[EpisodeRecord, str]]:
    """Record every episode of ``opts.out`` that a stopped proxy left unrecorded: each record,
    with what was done (``recovered``, or ``already recorded`` for a journal that only lacked
    its mark)."""
    from limbo.log.store import find_record, scan

    found = unrecorded(opts.out)
    if not found:
        raise UsageError(f"{opts.out} holds no unrecorded proxy episode: nothing to recover")
    recorded = scan(opts.out).ids
    out = []
    for path in found:
        entries = read_journal(path)
        episode = first(entries, "start")["episode_id"]
        if episode in recorded:  # the proxy died between the record and its mark
            _mark(opts, path)
            out.append((find_record(opts.out, episode), "already recorded; its journal now "
                                                        "says so"))
            continue
        out.append((await _recover_one(opts, path, entries), "recovered and recorded"))
    return out


async def _recover_one(opts: Options, path: Path, entries: list[dict[str, Any]]
                       ) -> EpisodeRecord:
    started = stopwatch()
    start = first(entries, "start")
    if start["proxy"]["world"] != opts.catalog.identity:
        raise UsageError(f"{path} was written with world {start['proxy']['world']}; give "
                         f"that world file (this one is {opts.catalog.identity})")
    async with connect(opts.upstream, START_TIMEOUT_S) as upstream:  # no agent waits on it
        opts.catalog.bind(str(t.get("name")) for t in await upstream.listed("tools"))
        ledger = ledger_of(entries, opts.catalog)
        before = Snapshot.of(next((e for e in entries if e["type"] == "baseline"), None))
        reconciler = Reconciler(upstream, opts.catalog, ledger, before, final=True)
        t = max((e.get("t", 0.0) for e in entries), default=0.0)
        journal = Journal(path, opts.scrub, new=False)
        try:
            for entry in await reconciler.settle(t):
                journal.write(entry, sync=True)
            _refuse_unreachable(reconciler, path)
            extra = {"unattributed": await reconciler.unattributed()}
        finally:
            journal.close()
    counts = ledger.counts()
    why = (f"the proxy stopped at t={t:g} s before recording the episode; recovered from "
           f"its journal by limbo proxy --recover (writes: "
           f"{', '.join(f'{k} {v}' for k, v in sorted(counts.items())) or 'none'})")
    return _finish(opts, path, started, ("infra_error", why), extra)
