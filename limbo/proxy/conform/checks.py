"""The eight properties ``limbo conform`` checks, each one procedure over one tool.

Each property is a few calls and a look at the server's state before and after them
(:mod:`limbo.proxy.conform.observe`). Its oracle is stated in docs/conform.md; in short: the
answers decide what they can (a reused key with other arguments answered with success fails,
whatever the state shows), the effects decide the rest, and where nothing shows the effects the
verdict is ``unknown``. A first call the server refuses leaves nothing to test (``unknown``,
with its answer): conform's arguments are made from the schema, and the server may want others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from limbo.proxy.conform.observe import Call, Unobservable, change
from limbo.proxy.conform.report import Verdict
from limbo.proxy.conform.subjects import Subject
from limbo.proxy.conform.trial import Answer, Trial, shown
from limbo.proxy.conform.values import Unmakeable, make, vary
from limbo.sim.tools import KEY_FIELD

CONCURRENT = 3
"""How many calls property 4 sends at once with one key."""


@dataclass
class Finding:
    """A check's verdict and what it rests on."""

    verdict: Verdict
    why: str
    finding: str | None = None
    effects: int | None = None
    removed: int | None = None


@dataclass
class Case:
    """One property on one tool: its trial, its arguments, the other tools under test."""

    trial: Trial
    subject: Subject
    tag: str
    others: list[Subject] = field(default_factory=list)

    def args(self, subject: Subject | None = None) -> dict[str, Any]:
        s = subject or self.subject
        return make(s.schema, f"{self.tag}{'x' if subject else ''}", KEY_FIELD)

    async def measured(self, calls: list[Call], act: Callable[[], Awaitable[list[Answer]]]
                       ) -> tuple[list[Answer], tuple[int, int] | str]:
        """The answers ``act`` got, and (items that appeared, disappeared) meanwhile — or why
        that cannot be known."""
        observer = self.trial.run.observer
        why = next((w for s, _ in calls if (w := observer.blind(s)) is not None), None)
        before = None
        if why is None:
            try:
                before = await self.trial.look(calls)
            except Unobservable as exc:
                why = str(exc)
        answers = await act()
        await self.trial.session.settle()
        if why is not None or before is None:
            return answers, why or "nothing observed"
        try:
            return answers, change(before, await self.trial.look(calls))
        except Unobservable as exc:
            return answers, str(exc)


def _unknown(why: str) -> Finding:
    return Finding("unknown", why)


def _refused_first(first: Answer) -> Finding | None:
    if first.lost:
        return _unknown("the server did not answer the first call")
    if not first.ok:
        return _unknown(f"the server refused the first call, so nothing could be tested: "
                        f"{shown(first)}")
    return None


def _counted(seen: tuple[int, int] | str, one: str, many: str) -> Finding:
    """Pass with one effect, fail with more, unknown with none or nothing seen."""
    if isinstance(seen, str):
        return _unknown(seen)
    added, removed = seen
    if added == 0:
        return Finding("unknown", "no effect seen for any call (does the observer show this "
                                  "tool's effects?)", effects=0, removed=removed)
    if added > 1:
        return Finding("fail", many.format(n=added), effects=added, removed=removed)
    return Finding("pass", one, effects=1, removed=removed)


async def replay(case: Case) -> Finding:
    """1: same key, same arguments, twice: one effect, the second answer equals the first."""
    args, key = case.args(), case.trial.key("p1")

    async def act() -> list[Answer]:
        return [await case.trial.call(args, key), await case.trial.call(args, key)]

    (first, second), seen = await case.measured([(case.subject, args)], act)
    if (early := _refused_first(first)) is not None:
        return early
    if not second.ok:
        return Finding("fail", f"the repeat with the same key was refused, not replayed: "
                               f"{shown(second)}", effects=_added(seen))
    if not second.same(first):
        return Finding("fail", f"the repeat was answered differently: {shown(second)} after "
                               f"{shown(first)}", effects=_added(seen))
    return _counted(seen, "one effect; the repeat got the first answer",
                    "{n} effects from one key and the same arguments")


def _added(seen: tuple[int, int] | str) -> int | None:
    return seen[0] if not isinstance(seen, str) else None


async def conflict(case: Case) -> Finding:
    """2: same key, other arguments: refused as a conflict, no second effect."""
    args, key = case.args(), case.trial.key("p2")
    other = vary(case.subject.schema, args, case.tag + "b", case.subject.prefer)
    if other is None:
        return Finding("not_applicable", "no argument can take a second value")

    async def act() -> list[Answer]:
        return [await case.trial.call(args, key), await case.trial.call(other, key)]

    (first, second), seen = await case.measured([(case.subject, args), (case.subject, other)],
                                                act)
    if (early := _refused_first(first)) is not None:
        return early
    if second.ok:
        how = "the first call's result, silently" if second.same(first) else "a success"
        return Finding("fail", f"the key reused with other arguments was answered with {how}: "
                               f"{shown(second)}", effects=_added(seen))
    found = _counted(seen, f"refused as a conflict ({shown(second)}); one effect",
                     "refused, yet {n} effects")
    return found


async def timeout_post(case: Case) -> Finding:
    """3: the key survives a timeout after commit: the retry makes no second effect."""
    args, key = case.args(), case.trial.key("p3")

    async def act() -> list[Answer]:
        first = await case.trial.call(args, key)  # the proxy's timeout_post: answer dropped
        await case.trial.session.settle()
        return [first, await case.trial.call(args, key)]

    (_, retry), seen = await case.measured([(case.subject, args)], act)
    heard = case.trial.wire.heard
    if not heard or case.trial.wire.lost:
        return _unknown("the server did not answer the call whose answer was dropped")
    if not heard[0].ok:
        return _unknown(f"the server refused the call whose answer was dropped: "
                        f"{shown(heard[0])}")
    if not retry.ok:
        return Finding("fail", f"the retry with the key after a timeout was refused: "
                               f"{shown(retry)}", effects=_added(seen))
    return _counted(seen, "the retry after the timeout made no second effect",
                    "{n} effects: the retry after the timeout repeated the committed write")


async def concurrent(case: Case) -> Finding:
    """4: concurrent calls with one key make one effect."""
    args, key = case.args(), case.trial.key("p4")

    async def act() -> list[Answer]:
        return await case.trial.together(args, key, CONCURRENT)

    answers, seen = await case.measured([(case.subject, args)], act)
    if not any(a.ok for a in answers):
        return _unknown(f"every concurrent call was refused: {shown(answers[0])}")
    return _counted(seen, f"{CONCURRENT} calls at once, one effect "
                          f"({sum(a.ok for a in answers)} answered with success)",
                    f"{{n}} effects from {CONCURRENT} concurrent calls with one key")


async def restart(case: Case) -> Finding:
    """5: the key holds after the server restarts, and after the key delay."""
    args, key, run = case.args(), case.trial.key("p5"), case.trial.run
    done: list[str] = []

    async def act() -> list[Answer]:
        first = await case.trial.call(args, key)
        done.append(await run.restart())
        if run.key_delay > 0:
            await asyncio.sleep(run.key_delay)
            done.append(f"waited {run.key_delay:g} s")
        return [first, await case.trial.call(args, key)]

    (first, second), seen = await case.measured([(case.subject, args)], act)
    if (early := _refused_first(first)) is not None:
        return early
    what = " and ".join(done)
    if not second.ok:
        return Finding("fail", f"{what}; the repeat with the key was refused: {shown(second)}",
                       effects=_added(seen))
    return _counted(seen, f"{what}; the repeat with the key made no second effect",
                    f"{what}; {{n}} effects: the key did not hold")


async def blind(case: Case) -> Finding:
    """6: no key, twice: reported (a blind retry's effect count), never failed."""
    args = case.args()

    async def act() -> list[Answer]:
        return [await case.trial.call(args), await case.trial.call(args)]

    (first, second), seen = await case.measured([(case.subject, args)], act)
    if (early := _refused_first(first)) is not None:
        return early
    if isinstance(seen, str):
        return _unknown(seen)
    added = seen[0]
    finding = ("a blind retry duplicates" if added >= 2 else
               "repeats without a key collapse" if added == 1 else "no effect seen")
    if not second.ok:
        finding = f"the repeat without a key was refused ({shown(second)})"
    return Finding("pass", f"{added} effect(s) from two calls without a key: {finding}",
                   finding, added, seen[1])


async def hints_honest(case: Case) -> Finding:
    """7: the hints are honest (readOnlyHint: no effect; idempotentHint: one effect for two
    calls without a key; destructiveHint false: nothing removed or changed)."""
    s = case.subject
    read_only, idem, additive = _hinted(s)
    args = case.args()

    async def act() -> list[Answer]:
        return [await case.trial.call(args) for _ in range(2 if idem else 1)]

    answers, seen = await case.measured([(s, args)], act)
    if (early := _refused_first(answers[0])) is not None:
        return early
    if isinstance(seen, str):
        return _unknown(seen)
    added, removed = seen
    wrong = ([f"readOnlyHint, yet {added} item(s) appeared and {removed} disappeared"]
             if read_only and (added or removed) else [])
    wrong += [f"idempotentHint, yet {added} effects from two calls"] if idem and added > 1 \
        else []
    wrong += [f"destructiveHint false, yet {removed} item(s) removed or changed"] \
        if additive and removed else []
    said = ", ".join(h for h, on in (("readOnlyHint", read_only), ("idempotentHint", idem),
                                     ("destructiveHint false", additive)) if on)
    return Finding("fail" if wrong else "pass", "; ".join(wrong) or f"{said}: honest "
                   f"({added} item(s) appeared, {removed} disappeared)", None, added, removed)


async def key_scope(case: Case) -> Finding:
    """8: the same key on two tools: shared scope (refused) or per-tool (two effects)."""
    other = partner(case.subject, case.others)
    assert other is not None  # else not applicable
    args, key = case.args(), case.trial.key("p8")
    try:
        args2 = case.args(other)
    except Unmakeable as exc:
        return _unknown(f"{other.wire}: {exc}")

    async def act() -> list[Answer]:
        return [await case.trial.call(args, key), await case.trial.call(args2, key, other)]

    (first, second), seen = await case.measured([(case.subject, args), (other, args2)], act)
    if (early := _refused_first(first)) is not None:
        return early
    return _scope(case, other, first, second, seen)


def partner(subject: Subject, others: list[Subject]) -> Subject | None:
    """The tool property 8 shares ``subject``'s key with: the first other keyed write under
    test."""
    return next((o for o in others if o.writes and o.keyed and o.wire != subject.wire), None)


def _scope(case: Case, other: Subject, first: Answer, second: Answer,
           seen: tuple[int, int] | str) -> Finding:
    declared = case.subject.key_scope
    if second.ok and second.same(first):
        return Finding("fail", f"{other.wire} with the key of a {case.subject.wire} call was "
                               f"answered with that call's result", "shared, replayed across "
                               "tools", _added(seen))
    if not second.ok:
        found, scope = f"shared: {other.wire} refused the key ({shown(second)})", "service"
    elif isinstance(seen, str):
        return _unknown(seen)
    elif seen[0] >= 2:
        found, scope = f"per tool: {other.wire} made its own effect with the key", "tool"
    else:
        return Finding("fail", f"{other.wire} answered with success but made no effect of its "
                               f"own ({seen[0]} in all)", "shared, silently", seen[0])
    if declared is not None and declared != scope:
        return Finding("fail", f"the world file says key_scope = {declared!r}; {found}",
                       found, _added(seen))
    return Finding("pass", found, found, _added(seen))


def _hinted(s: Subject) -> tuple[bool, bool, bool]:
    """Which hints property 7 checks: readOnlyHint true; idempotentHint true and
    destructiveHint false on a tool that is not read-only."""
    read_only = s.hints.get("readOnlyHint") is True
    return (read_only, s.hints.get("idempotentHint") is True and not read_only,
            s.hints.get("destructiveHint") is False and not read_only)


@dataclass(frozen=True)
class Property:
    number: int
    name: str
    summary: str
    run: Callable[[Case], Awaitable[Finding]]
    calls: int
    """How many calls it makes (at most)."""
    keyed: bool = True
    """It needs a key (a write that takes ``idempotency_key``)."""


PROPERTIES = {p.number: p for p in [
    Property(1, "replay", "same key, same arguments, twice: one effect, the same answer",
             replay, 2),
    Property(2, "conflict", "same key, other arguments: refused, no second effect", conflict, 2),
    Property(3, "timeout_post", "a timeout after commit, then the retry with the key: one "
                                "effect", timeout_post, 2),
    Property(4, "concurrent", f"{CONCURRENT} concurrent calls with one key: one effect",
             concurrent, CONCURRENT),
    Property(5, "restart", "the key holds after a restart (and the key delay)", restart, 2),
    Property(6, "blind_retry", "no key, twice: how many effects a blind retry makes "
                               "(reported)", blind, 2, keyed=False),
    Property(7, "annotations", "readOnlyHint, idempotentHint, destructiveHint are honest",
             hints_honest, 2, keyed=False),
    Property(8, "key_scope", "the same key on two tools: shared or per-tool scope", key_scope,
             2),
]}


def not_applicable(prop: Property, subject: Subject, others: list[Subject]) -> str | None:
    """Why ``prop`` does not apply to ``subject``, among the tools under test ``others``
    (``None``: it does)."""
    if prop.number == 7:
        return None if any(_hinted(subject)) else (
            "it declares no hint to check (readOnlyHint, idempotentHint true, destructiveHint "
            "false)")
    if not subject.writes:
        return f"read-only ({'the world file' if subject.source == 'world' else 'readOnlyHint'})"
    if prop.keyed and not subject.keyed:
        return "it takes no idempotency_key"
    if prop.number == 3 and (subject.tool is None or subject.tool.write is None):
        return "the proxy's timeout_post acts on a declared write, and no declaration of it " \
               "could be made (its name or arguments)"
    if prop.number == 8 and partner(subject, others) is None:
        return "no other keyed write under test to share a key with"
    if prop.number == 6 and subject.key_required:
        return "its idempotency_key is required: no call goes without one"
    return None
