"""Running tallies of a grid and the summary table printed at the end of ``limbo run``.

Rates are over *rated* episodes (:mod:`limbo.log.rated`: the fault fired, and the episode did not
end in ``infra_error``, ``model_error`` or ``timeout``); errored episodes are counted in every
row and excluded from the rates, never dropped silently.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from limbo.base.registry import entries
from limbo.log.errored import ErrorGroups
from limbo.log.rated import errored, rated


@dataclass
class Tally:
    episodes: int = 0
    fired: int = 0
    rated: int = 0
    duplicate: int = 0
    task_success: int = 0
    exactly_once: int = 0
    overclaim: int = 0
    infra: int = 0
    model_error: int = 0
    timeout: int = 0
    cost: float = 0.0
    cost_unknown: int = 0
    responses: int = 0
    """Model turns the provider answered (``runtime.model_calls``, as :func:`tallied` hands
    it over with the outcome)."""
    cached: int = 0
    """Model turns replayed from the response cache."""
    attempts: int = 0
    billed: float = 0.0
    """What the provider's turns cost (a cached turn costs nothing)."""
    billed_unknown: int = 0
    """Episodes with a provider turn of unknown price."""

    def add(self, outcome: Mapping[str, Any]) -> None:
        term = outcome["termination"]
        self.count(outcome, term, errored(term), rated(outcome["fault_fired"], term))

    def count(self, outcome: Mapping[str, Any], term: str, error: bool, rates: bool) -> None:
        """:meth:`add` told the outcome's termination and whether it is errored and rated
        (:class:`Summary` adds each outcome to three tallies and asks once)."""
        self.episodes += 1
        calls = outcome.get("model_calls")
        if calls is not None and isinstance(calls, Mapping):
            self._calls(calls)
        cost = outcome.get("cost_usd")
        if cost is None:
            self.cost_unknown += 1
        else:
            self.cost += cost
        if error:  # the sandbox, the adapter, the provider or the machine failed
            self.infra += term == "infra_error"
            self.model_error += term == "model_error"
            self.timeout += term == "timeout"
        elif rates:
            self.fired += 1
            self.rated += 1
            self.duplicate += outcome["duplicate"]
            self.task_success += outcome["task_success"]
            self.exactly_once += outcome["exactly_once"]
            self.overclaim += outcome["overclaim"]

    def _calls(self, calls: Mapping[str, Any]) -> None:
        self.responses += int(calls.get("responses") or 0)
        self.cached += int(calls.get("cached") or 0)
        self.attempts += int(calls.get("attempts") or 0)
        billed = calls.get("billed_usd")
        if isinstance(billed, int | float):
            self.billed += billed
        else:
            self.billed_unknown += 1

    def actual(self) -> dict[str, Any]:
        """What the episodes tallied here spent, for the manifest beside the forecast."""
        return {"episodes": self.episodes,
                "usd": None if self.billed_unknown else round(self.billed, 10),
                "usd_recorded": None if self.cost_unknown else round(self.cost, 10),
                "calls": self.responses, "cached": self.cached, "attempts": self.attempts}

    @property
    def errors(self) -> int:
        return self.infra + self.model_error + self.timeout

    def rate(self, name: str) -> float | None:
        return getattr(self, name) / self.rated if self.rated else None


def family_of(fault: str) -> str:
    cls = entries("fault").get(fault)
    return str(getattr(cls, "family", "none")) if cls is not None else "unknown"


@dataclass
class Summary:
    """Tallies overall, by fault family and by model."""

    total: Tally = field(default_factory=Tally)
    by_family: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_model: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    families: dict[str, str] = field(default_factory=dict)
    """Family of each fault seen (looked up once per fault, not once per episode)."""
    errors: ErrorGroups = field(default_factory=ErrorGroups)
    """The errored and timed-out episodes, grouped by reason."""
    uncounted: list[str] = field(default_factory=list)
    """Stored records the summary could not count, each where it is and why (:func:`uncountable`)."""

    @classmethod
    def of(cls, parts: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> Summary:
        """The summary of stored records' (where, cell, outcome) (streamed:
        :func:`~limbo.log.store.iter_tallied`); a record it cannot count is listed in
        :attr:`uncounted`, not added."""
        summary = cls()
        for where, cell, outcome in parts:
            why = uncountable(cell, outcome)
            if why is None:
                summary.add(cell, outcome)
            else:
                summary.uncounted.append(f"{where}: {why}")
        return summary

    def add(self, cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
        fault, term = cell["fault"], outcome["termination"]
        family = self.families.get(fault)
        if family is None:
            family = self.families[fault] = family_of(fault)
        error, rates = errored(term), rated(outcome["fault_fired"], term)
        for tally in (self.total, self.by_family[family], self.by_model[cell["model"]]):
            tally.count(outcome, term, error, rates)
        if error:
            self.errors.add(term, outcome.get("termination_reason"), cell["model"])


RATED_FLAGS = ("duplicate", "task_success", "exactly_once", "overclaim")


def uncountable(cell: Mapping[str, Any], outcome: Mapping[str, Any]) -> str | None:
    """Why :meth:`Summary.add` cannot count a stored record — a field it adds up missing, or
    of another kind — or ``None``. The records a run writes always have them; one edited, or
    written by another tool, may pass the reader's checks without them, and a resumed run's
    summary must not end in a traceback over it."""
    for name in TALLIED_CELL:
        if not isinstance(cell.get(name), str):
            return f"its cell has no {name} text"
    if "fault_fired" not in outcome:
        return "its outcome has no fault_fired"
    if rated(outcome["fault_fired"], outcome["termination"]):
        for name in RATED_FLAGS:
            if type(outcome.get(name)) not in (bool, int):
                return f"its outcome's {name} is not a flag"
    cost = outcome.get("cost_usd")
    if cost is not None and (type(cost) not in (int, float)):
        return "its outcome's cost_usd is not a number"
    if outcome.get("model_calls") is not None:
        return "its outcome holds model_calls, which a record keeps in its runtime"
    return None


TALLIED_CELL = ("model", "fault")
TALLIED_OUTCOME = ("cost_usd", "termination", "fault_fired", "duplicate", "task_success",
                   "exactly_once", "overclaim", "termination_reason")


def tallied(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields of a record's cell and outcome that :meth:`Summary.add` reads, with how its
    model turns were answered (``runtime.model_calls``) beside the outcome's: what an executor
    hands the writer with each record's line (pickling the whole cell and outcome both ways
    cost a worker process twice as much as the line itself)."""
    cell, outcome = record["cell"], record["outcome"]
    calls = (record.get("runtime") or {}).get("model_calls")
    return ({k: cell[k] for k in TALLIED_CELL},
            {**{k: outcome[k] for k in TALLIED_OUTCOME if k in outcome},
             **({"model_calls": calls} if calls else {})})


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def rows(tallies: dict[str, Tally]) -> list[list[str]]:
    out = []
    for name in sorted(tallies):
        t = tallies[name]
        out.append([name, str(t.episodes), str(t.fired), _pct(t.rate("duplicate")),
                    _pct(t.rate("task_success")), _pct(t.rate("exactly_once")),
                    _pct(t.rate("overclaim")), str(t.errors)])
    return out


HEADER = ["", "episodes", "rated", "dup %", "TS %", "EOS %", "overclaim %", "errors"]
"""``rated``: the fault fired and the episode is not errored (:mod:`limbo.log.rated`); the rates
are over these; ``errors``: errored episodes (``infra_error``, ``model_error``, ``timeout``)."""


def render(summary: Summary, console: Any) -> None:
    """Print the summary tables with rich."""
    from rich.table import Table

    for title, tallies in (("by fault family", summary.by_family),
                           ("by model", summary.by_model)):
        table = Table(title=f"LIMBO summary {title} (rates over rated episodes: fault fired, "
                            f"not errored)")
        for i, head in enumerate(HEADER):
            table.add_column(head, justify="left" if i == 0 else "right")
        for row in rows(tallies):
            table.add_row(*row)
        t = summary.total
        table.add_row("all", str(t.episodes), str(t.fired), _pct(t.rate("duplicate")),
                      _pct(t.rate("task_success")), _pct(t.rate("exactly_once")),
                      _pct(t.rate("overclaim")), str(t.errors), style="bold")
        console.print(table)
