"""One ``limbo conform`` run: connect, find the tools under test, say how many calls it will
make, run each tool × property as one recorded check, and return the report.

The checks run one after another on one connection (property 5 replaces it), so what changes on
the server between a check's two looks is that check's. A property that does not apply to a
tool makes no call and records no episode. Conform is a client like any other: it writes for
real, so it says how many calls it will make before the first (``--dry-run``: only that, and
each check's first arguments), and calls no tool outside ``--tool``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from limbo.base.hashing import digest
from limbo.base.runtime import now_iso
from limbo.proxy.conform.checks import PROPERTIES, Case, Finding, Property, not_applicable
from limbo.proxy.conform.observe import Nothing, Observer, ProbeCommand, Reads
from limbo.proxy.conform.report import CheckVerdict, Verdicts
from limbo.proxy.conform.subjects import Subject, catalog_for, subjects
from limbo.proxy.conform.trial import Conformance, Trial
from limbo.proxy.conform.values import Unmakeable, make
from limbo.proxy.declared import Catalog
from limbo.proxy.upstream import START_TIMEOUT_S, Upstream, UpstreamSpec, connect
from limbo.sim.tools import KEY_FIELD

KIND = "conform"
"""The run directory manifest's ``kind``."""


@dataclass(frozen=True)
class ConformOptions:
    upstream: UpstreamSpec
    world: Path | None
    tools: list[str]
    probe: str | None
    properties: list[int]
    required: list[int]
    out: Path
    scale: float
    key_delay: float
    dry_run: bool
    scrub: Any
    again: list[str]
    """The command line's upstream, world and probe flags, for the reproducers."""

    def say(self, line: str) -> None:
        print(self.scrub(line), file=sys.stderr, flush=True)


def reproducer(opts: ConformOptions, tool: str, number: int) -> str:
    """The ``limbo conform`` command that checks one tool and property again."""
    scale = ["--time-scale", f"{opts.scale:g}"] if number == 3 and opts.scale != 1 else []
    return shlex.join(["limbo", "conform", *opts.again, "--tool", tool, "--property",
                       str(number), *scale,
                       *(["--key-delay", f"{opts.key_delay:g}"] if number == 5 and
                         opts.key_delay else []),
                       "--out", f"{opts.out}-{tool}-{number}"])


async def conform(opts: ConformOptions) -> Verdicts:
    """Run the checks (or, with ``dry_run``, only plan them); the report."""
    upstream = connect(opts.upstream, START_TIMEOUT_S)
    await upstream.__aenter__()
    holder = _Holder(opts.upstream, upstream)
    try:
        listed = await upstream.listed("tools")
        catalog, own = _catalog(opts, listed)
        subs = subjects(listed, catalog, own, opts.tools)
        plan = [(s, PROPERTIES[n]) for s in subs for n in opts.properties]
        made = [(s, p) for s, p in plan if not_applicable(p, s, subs) is None]
        calls, writes = sum(p.calls for _, p in made), sum(p.calls for s, p in made if s.writes)
        server = {"name": upstream.name, "version": upstream.version}
        observer = _observer(opts, catalog, holder)
        opts.say(f"limbo conform: {len(subs)} tool(s) of {opts.upstream.describe()}, "
                 f"{len(plan)} check(s): at most {calls} call(s), {writes} of them to tools that "
                 f"may write, for real" + (" (dry run: none is made)" if opts.dry_run else ""))
        report = Verdicts(upstream=opts.upstream.describe(), server=server,
                        world=catalog.identity if opts.world else None,
                        observer=_said(opts, observer), properties={
                            n: p.summary for n, p in PROPERTIES.items()},
                        required=opts.required, planned_calls=calls, verdicts=[])
        if opts.dry_run:
            report.verdicts = [_planned(opts, report, s, p, subs) for s, p in plan]
            return report
        run = Conformance(catalog, opts.upstream, opts.out, opts.scale, opts.scrub, _nonce(opts),
                  observer, upstream, holder.restart, opts.key_delay)
        holder.run = run
        manifest(opts, catalog, "running")
        for subject, prop in plan:
            report.verdicts.append(await _check(opts, report, run, subject, prop, subs))
        manifest(opts, catalog, "recorded", run.episodes[-1] if run.episodes else None)
        return report
    finally:
        await holder.close()


class _Holder:
    """The connection of the moment: property 5 restarts the server (stdio) or opens a new
    session (HTTP)."""

    def __init__(self, spec: UpstreamSpec, upstream: Upstream) -> None:
        self.spec, self.upstream = spec, upstream
        self.run: Conformance | None = None

    def now(self) -> Upstream:
        return self.run.upstream if self.run is not None else self.upstream

    async def restart(self) -> str:
        await self.now().__aexit__()
        fresh = connect(self.spec, START_TIMEOUT_S)
        await fresh.__aenter__()
        if self.run is not None:
            self.run.upstream = fresh
        self.upstream = fresh
        return ("restarted the server" if self.spec.url is None else
                "opened a new MCP session (a server reached by URL is not LIMBO's to restart)")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.now().__aexit__()


def _catalog(opts: ConformOptions, listed: list[dict[str, Any]]) -> tuple[Catalog, set[str]]:
    if opts.world is None:
        return catalog_for(None, None, listed)
    from limbo.sim.worldfile.check import checked
    from limbo.sim.worldfile.kit import DIGEST_CHARS

    world, source = checked(opts.world, tasks=False)
    return catalog_for(world, f"{world.world.name}@{source.digest[:DIGEST_CHARS]}", listed)


def _observer(opts: ConformOptions, catalog: Catalog, holder: _Holder) -> Observer:
    if opts.probe is not None:
        return ProbeCommand(opts.probe)
    if opts.world is not None:
        return Reads(catalog, holder.now)
    return Nothing()


def _said(opts: ConformOptions, observer: Observer) -> str:
    if isinstance(observer, ProbeCommand):
        return f"--probe {observer.command}"
    if isinstance(observer, Reads):
        return "the world file's declared reads"
    return "nothing (no --probe, no --world): effect-dependent verdicts are unknown"


def _nonce(opts: ConformOptions) -> str:
    """What makes this run's keys and values its own (two runs against one database never
    share a key)."""
    return digest([now_iso(), os.getpid(), str(opts.out)], 8)


def _verdict(opts: ConformOptions, report: Verdicts, s: Subject, p: Property, outcome: Finding,
             **extra: Any) -> CheckVerdict:
    return CheckVerdict(
        tool=s.wire, declared=s.tool.name if s.tool is not None else None, property=p.number,
        name=p.name, verdict=outcome.verdict, why=outcome.why, finding=outcome.finding,
        source=s.source, arguments_from=s.args_from, observed_by=report.observer,
        effects=outcome.effects, removed=outcome.removed,
        reproduce=reproducer(opts, s.wire, p.number), **extra)


def _planned(opts: ConformOptions, report: Verdicts, s: Subject, p: Property, subs: list[Subject]
             ) -> CheckVerdict:
    why = not_applicable(p, s, subs)
    if why is not None:
        return _verdict(opts, report, s, p, Finding("not_applicable", why))
    try:
        first = make(s.schema, "TAG", KEY_FIELD)
    except Unmakeable as exc:
        return _verdict(opts, report, s, p, Finding("unknown", f"cannot make arguments: {exc}"))
    keyed = " with an idempotency_key" if p.keyed else ""
    return _verdict(opts, report, s, p, Finding("planned", f"up to {p.calls} call(s){keyed}, "
                                                            f"the first with {first}"))


async def _check(opts: ConformOptions, report: Verdicts, run: Conformance, s: Subject, p: Property,
                 subs: list[Subject]) -> CheckVerdict:
    why = not_applicable(p, s, subs)
    if why is not None:
        return _verdict(opts, report, s, p, Finding("not_applicable", why))
    trial = Trial(run, s, p.number, p.name, "timeout_post" if p.number == 3 else "none")
    try:
        outcome = await p.run(Case(trial, s, f"{run.nonce}p{p.number}", subs))
    except Unmakeable as exc:
        outcome = Finding("unknown", f"cannot make arguments: {exc}")
    verdict = _verdict(opts, report, s, p, outcome, calls=trial.calls)
    verdict.episode = await trial.close(verdict.model_dump())
    opts.say(f"limbo conform: {s.wire} {p.number} {p.name}: {verdict.verdict} ({verdict.why})")
    return verdict


def manifest(opts: ConformOptions, catalog: Catalog, status: str, last: str | None = None) -> None:
    """The run directory's manifest: a ``conform`` run, each check its own cell, and what its
    records mean to a reader (the fault modes' families, the tools' kinds)."""
    from limbo.base.provenance import provenance
    from limbo.experiments.design import log_design
    from limbo.log.store import manifest_file, read_manifest, scan, write_manifest
    from limbo.sim.catalog import catalog as faults

    path = manifest_file(opts.out, None)
    old = read_manifest(path) if path.is_file() else {"started_at": now_iso()}
    done = len(scan(opts.out).ids)
    ended = {"ended_at": now_iso(), "last_episode": last} if status == "recorded" else {}
    write_manifest(path, {
        **old, "kind": KIND, "command": shlex.join(["limbo", "conform", *opts.again]),
        "status": status, "episodes": done, "cells": done, "world": catalog.identity,
        "upstream": opts.upstream.describe(), **ended,
        "design": log_design(faults(), {n: t.kind for n, t in catalog.tools.items()}),
        **provenance()}, opts.scrub)
