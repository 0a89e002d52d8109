"""What ``limbo run`` prints while it runs and when it ends.

While it runs: a rich bar on a terminal, a plain line every few seconds into a pipe or a file
(so a log stays readable), nothing with ``--quiet``. When a grid ends: what ran, the summary
tables, and — when episodes ended in an error or a timeout — their reasons grouped (first line,
count, models) with the command that retries them (:mod:`limbo.log.errored`).
"""

from __future__ import annotations

from typing import Any

from limbo.base.words import plural
from limbo.log.errored import ERROR_TERMINATIONS, TIMEOUT, retry_command
from limbo.providers.limiter import progress_note
from limbo.run import activity
from limbo.run.runner import RunResult
from limbo.run.summary import Summary, render

PROGRESS_EVERY_S = 5.0
BAR_EVERY_S = 0.1


class Progress:
    """Rich progress bar on a terminal; a plain line every few seconds otherwise."""

    def __init__(self, console: Any, total: int, quiet: bool) -> None:
        from limbo.base.runtime import stopwatch

        self.console, self.total, self.quiet = console, total, quiet
        self.clock = stopwatch
        self.start = self.last = stopwatch()
        self.bar: Any = None
        if console.is_terminal and not quiet:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                                TimeRemainingColumn(), console=console)
            self.task = self.bar.add_task("episodes", total=total, note="")
            self.bar.start()

    def _note(self, done: int, summary: Summary) -> str:
        rate = done / max(self.clock() - self.start, 1e-9)
        dup = summary.total.rate("duplicate")
        unknown = summary.total.cost_unknown
        cost = f"cost ${summary.total.cost:.4f}" + (f" (+{unknown} unpriced)" if unknown else "")
        calls = progress_note()  # provider calls in flight and the limiter's current limit
        elsewhere = activity.note()  # a cluster's nodes and cells in flight
        return f"{rate:.0f}/s  dup {100 * (dup or 0):.1f}%  {cost}" + "".join(
            f"  {text}" for text in (calls, elsewhere) if text)

    def __call__(self, done: int, total: int, summary: Summary) -> None:
        now = self.clock()
        if self.bar is not None:  # the bar redraws ten times a second: updating it more is waste
            if now - self.last >= BAR_EVERY_S or done >= total:
                self.last = now
                self.bar.update(self.task, completed=done, total=total,
                                note=self._note(done, summary))
            return
        if self.quiet or (now - self.last < PROGRESS_EVERY_S and done < total):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (total - done) / rate if rate else 0.0
        self.console.print(f"[limbo] {done}/{total} episodes  ETA {eta:.0f}s  "
                           f"{self._note(done, summary)}", highlight=False, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def say(console: Any, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


EXIT_ERRORED = 1
"""Errored cells remain (``--retry-errors`` runs them again), or a gate failed."""
EXIT_BUDGET = 3
"""``--max-cost`` stopped the pass with cells left to run."""


def report_end(result: RunResult, name: str, out: Any, console: Any, argv: list[str],
               tables: bool = True) -> int:
    """Print how a grid's pass ended (without the summary ``tables`` for a pilot); its exit
    status: :data:`EXIT_BUDGET` when the budget left cells unrun, else :data:`EXIT_ERRORED`
    when errored cells (``infra_error``, ``model_error``) remain in this run's shard, else 0."""
    say(console, ("pilot: " if not tables else "") + _ran_line(result, name, out))
    if result.stopped and result.stopped_by != "errors":
        say(console, f"stopped: {result.stopped}")
    if tables:
        render(result.summary, console)
    _uncounted(result.summary.uncounted, console)
    if result.stopped_by == "errors":  # one line: the cause, and what is left to retry
        say(console, f"stopped early: {result.stopped}; left: {_left(result)}; once the "
                     f"cause is fixed: {retry_command(argv, False)}")
    else:
        _errors(result, console, argv)
    if result.stopped_by == "budget" and result.left:
        return EXIT_BUDGET
    return EXIT_ERRORED if result.errored else 0


def _uncounted(where: list[str], console: Any) -> None:
    """The stored records the summary could not count (a resumed run's, edited or written by
    another tool), the first few by file and line."""
    if where:
        more = f"; and {len(where) - 3:,} more" if len(where) > 3 else ""
        say(console, f"{plural(len(where), 'stored record')} not in this summary (edited, or "
                     f"written by another tool): {'; '.join(where[:3])}{more}")


def _ran_line(result: RunResult, name: str, out: Any) -> str:
    left = f", {result.left:,} left to run" if result.left else ""
    retried = (f" ({plural(result.retried, 'errored cell')} set aside and run again)"
               if result.retried else "")
    total = result.summary.total
    cost = (f"cost ${total.cost:.4f}" + (f" + unknown for {plural(total.cost_unknown, 'episode')}"
                                          f" without a known price" if total.cost_unknown else ""))
    return (f"grid {name}: ran {plural(result.ran, 'episode')}{retried}, {result.skipped:,} "
            f"already done{left}, in {result.wall_s:.1f}s, {cost}{_responses(result)} → {out}")


def _responses(result: RunResult) -> str:
    """Where the pass's model responses came from, when it asked a provider for any."""
    called, cached = result.responses
    if not (called or cached):
        return ""
    return (f", {plural(called + cached, 'model response')} ({cached:,} from the response "
            f"cache)")


def _left(result: RunResult) -> str:
    parts = [plural(result.errored, "errored cell")] if result.errored else []
    if result.left:
        parts.append(f"{plural(result.left, 'cell')} not run")
    return " and ".join(parts) or "no cell"


def _errors(result: RunResult, console: Any, argv: list[str]) -> None:
    """The errored and timed-out episodes of the pass by reason, with the commands that run
    them again."""
    errors = result.summary.errors
    errored, timeouts = errors.count(), errors.count((TIMEOUT,))
    if not errored and not timeouts:
        return
    say(console, f"{plural(errored, 'episode')} ended in {' or '.join(ERROR_TERMINATIONS)}"
                 + (f", {timeouts:,} in timeout" if timeouts else "") + "; by reason:")
    for line in errors.lines():
        say(console, line)
    if errored:
        say(console, f"the run is not complete until they run again; once the cause is fixed: "
                     f"{retry_command(argv, False)}")
    if timeouts:
        say(console, f"to run the timed-out ones again too: {retry_command(argv, True)}")
