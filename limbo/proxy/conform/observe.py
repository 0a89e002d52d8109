"""How ``limbo conform`` sees a server's effects: its declared reads, or the user's probe.

An answer says what the server *claims*; an effect is what it *did*. Conform counts effects by
looking at the server's state before and after a check, as a multiset of items: an item that
appears is an effect, an item that disappears (or changes: one out, one in) is a removal. The
checks run one after another, so a change between the two looks is the check's — another client
writing to the same server meanwhile would be counted too (run conform against a server of its
own).

Two observers, the first that can see a tool's effect wins:

- ``--probe CMD``: a command the user gives, run (split like a shell would, not by one) before
  and after each check, printing the server's effects as JSON lines — ``sqlite3 -json``, a
  ``psql`` query, a script. It sees whatever it prints, for every tool.
- the world file's declared reads, as the proxy reconciles: the read that lists a write, with
  the write's arguments, and every read that takes no argument. They see the tools the world
  file declares a read for.

With neither, a check that rests on effects has nothing to rest on: its verdict is
``unknown``, never ``pass``.
"""

from __future__ import annotations

import asyncio
import shlex
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from limbo.base.errors import UsageError
from limbo.base.hashing import canonical_json
from limbo.proxy.conform.subjects import Subject
from limbo.proxy.declared import Catalog
from limbo.proxy.shapes import payload, readable
from limbo.proxy.snapshot import argument_free
from limbo.proxy.upstream import Upstream, UpstreamLost
from limbo.proxy.wire import loads
from limbo.sim.readback import resolve
from limbo.sim.tools import KEY_FIELD

PROBE_TIMEOUT_S = 60.0
State = Counter[str]
Call = tuple[Subject, dict[str, Any]]


class Unobservable(Exception):
    """A look at the server's state failed (the probe or a read): the check cannot decide."""


class Observer(Protocol):
    """What a check looks at the server's state through."""

    def blind(self, subject: Subject) -> str | None:
        """Why this observer cannot see ``subject``'s effects (``None``: it can)."""

    async def look(self, calls: list[Call]) -> State:
        """The server's state as far as it shows ``calls``' effects."""


def change(before: State, after: State) -> tuple[int, int]:
    """(items that appeared, items that disappeared) between two looks."""
    return sum((after - before).values()), sum((before - after).values())


class Nothing:
    """No probe, no declared read: nothing is seen."""

    def blind(self, subject: Subject) -> str | None:
        return "no --probe and no declared read shows its effects"

    async def look(self, calls: list[Call]) -> State:
        return Counter()


class ProbeCommand:
    """``--probe CMD``: the effects the command prints, one JSON value a line."""

    def __init__(self, command: str) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:
            raise UsageError(f"--probe: {exc}") from None
        if not self.argv:
            raise UsageError("--probe is empty: give a command that prints the effects")
        self.command = command

    def blind(self, subject: Subject) -> str | None:
        return None

    async def look(self, calls: list[Call]) -> State:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise Unobservable(f"--probe: cannot start {self.argv[0]!r}: "
                               f"{exc.strerror or exc}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise Unobservable(f"--probe did not finish in {PROBE_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise Unobservable(f"--probe exited with {proc.returncode}: {tail[0][:200]}")
        return _lines(out)


def _lines(out: bytes) -> State:
    found: State = Counter()
    for number, raw in enumerate(out.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            found[canonical_json(loads(raw.decode("utf-8")))] += 1
        except (ValueError, UnicodeDecodeError):
            raise Unobservable(f"--probe line {number} is not JSON: "
                               f"{raw[:80].decode('utf-8', 'replace')!r}") from None
    return found


class Reads:
    """The world file's declared reads, through the upstream conform is connected to now."""

    def __init__(self, catalog: Catalog, upstream: Callable[[], Upstream]) -> None:
        self.catalog, self.upstream = catalog, upstream

    def blind(self, subject: Subject) -> str | None:
        tool = subject.tool
        if subject.writes and (tool is None or tool.write is None or tool.op.readback is None):
            return "no --probe, and the world file declares no read that lists it"
        if not subject.writes and not argument_free(self.catalog):
            return "no --probe, and the world file declares no read without arguments"
        return None

    async def look(self, calls: list[Call]) -> State:
        reads: list[tuple[str, dict[str, Any]]] = [(t.name, {}) for t in
                                                   argument_free(self.catalog)]
        for subject, args in calls:
            tool = subject.tool
            if tool is None or tool.write is None:
                continue
            plan = resolve(tool.op, {k: v for k, v in args.items() if k != KEY_FIELD})
            if plan is not None and (plan.tool, plan.args) not in reads:
                reads.append((plan.tool, plan.args))
        found: State = Counter()
        for name, args in reads:
            for item in await self._items(name, args):
                found[canonical_json([name, item])] += 1
        return found

    async def _items(self, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            answer = payload(await self.upstream().read(self.catalog.wire_name(name), args))
        except UpstreamLost as exc:
            raise Unobservable(f"the read {name} got no answer: {exc}") from None
        if not answer.get("ok"):
            raise Unobservable(f"the read {name} failed: {str(answer)[:200]}")
        found: list[dict[str, Any]] = readable(answer)["items"]
        return found
