"""``--max-cost``: one budget for a run's pass, shared by every process that starts episodes.

The rule is one rule whatever the executor: an episode may start only while, at the mean cost
per episode ended so far, it and every episode in flight — in any process — fit in what is
left (:class:`Spend`). Once an episode is refused the budget is closed for good, so no episode
starts after the budget is spent, and what a pass spends passes the budget by at most what was
in flight when it closed (nothing at all when episodes cost alike). Each episode is counted
once, when it ends, by the process that ran it; an episode cancelled before it ended (Ctrl-C,
a stop) only leaves the in-flight count.

Where the count lives depends on where episodes run, so each executor makes its own
(:meth:`limbo.run.context.Executor.budget`): :class:`LocalBudget` in this process,
:class:`SharedBudget` in memory shared with forked workers (made before they fork), and an
actor on a Ray cluster (:mod:`limbo.run.ray.budget`). They share :class:`Spend`'s arithmetic
and the async :class:`Budget` interface (an actor answers over the network).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Budget(Protocol):
    """Admission of episodes under ``--max-cost``; pair each admitted episode with one
    :meth:`settle` or :meth:`abandon`."""

    async def admit(self) -> bool:
        """Whether one more episode may start (counted in flight if so)."""

    async def settle(self, cost: float) -> None:
        """An admitted episode ended and cost ``cost`` USD (0 when its price is unknown)."""

    async def abandon(self) -> None:
        """An admitted episode was cancelled before it ended: it cost nothing counted."""


@dataclass
class Spend:
    """The budget's arithmetic: no I/O, so every executor's budget reuses it unchanged."""

    max_cost: float
    spent: float = 0.0
    ended: int = 0
    in_flight: int = 0
    closed: bool = False

    def admit(self) -> bool:
        if not self.closed:
            mean = self.spent / max(self.ended, 1)
            self.closed = self.spent + (self.in_flight + 1) * mean > self.max_cost
        if self.closed:
            return False
        self.in_flight += 1
        return True

    def settle(self, cost: float) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self.spent += cost
        self.ended += 1

    def abandon(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


def cost_of(record: Mapping[str, Any]) -> float:
    """What an ended episode counts against the budget: what its provider turns were billed
    (``runtime.model_calls.billed_usd``: a turn replayed from the response cache is billed
    nothing, though the record's ``outcome.cost_usd`` keeps the price it had when first
    answered), else its recorded cost, else nothing."""
    calls = (record.get("runtime") or {}).get("model_calls") or {}
    billed = calls.get("billed_usd") if isinstance(calls, Mapping) else None
    cost = billed if isinstance(billed, int | float) else \
        record.get("outcome", {}).get("cost_usd")
    return float(cost) if isinstance(cost, int | float) else 0.0


class LocalBudget:
    """:class:`Budget` of episodes that all run in this process."""

    def __init__(self, max_cost: float) -> None:
        self.spend = Spend(max_cost)

    async def admit(self) -> bool:
        return self.spend.admit()

    async def settle(self, cost: float) -> None:
        self.spend.settle(cost)

    async def abandon(self) -> None:
        self.spend.abandon()


_FIELDS = ("spent", "ended", "in_flight", "closed")
"""The shared numbers, in :class:`Spend`'s order."""


class SharedBudget:
    """:class:`Budget` of forked workers: :class:`Spend`'s fields in shared memory under one
    lock, made before the workers fork so that every one of them, and the parent, sees the
    same numbers. A worker that dies in mid-episode leaves its episodes counted in flight,
    which only makes the budget more careful — and a dead worker stops the run anyway."""

    def __init__(self, max_cost: float) -> None:
        self.max_cost = max_cost
        self.cells = multiprocessing.get_context("fork").Array("d", len(_FIELDS))

    def _spend(self) -> Spend:
        """The shared numbers as a :class:`Spend` (the caller holds the lock)."""
        spent, ended, in_flight, closed = self.cells[:]
        return Spend(self.max_cost, spent, int(ended), int(in_flight), bool(closed))

    def _apply(self, step: str, *args: float) -> bool:
        with self.cells.get_lock():
            spend = self._spend()
            answer = getattr(spend, step)(*args)
            self.cells[:] = [spend.spent, spend.ended, spend.in_flight, float(spend.closed)]
        return bool(answer)

    async def admit(self) -> bool:
        return self._apply("admit")

    async def settle(self, cost: float) -> None:
        self._apply("settle", cost)

    async def abandon(self) -> None:
        self._apply("abandon")

    def closed(self) -> bool:
        """Whether an episode was refused (the parent stops handing out cells)."""
        return bool(self.cells[3])

    def state(self) -> Spend:
        with self.cells.get_lock():
            return self._spend()
