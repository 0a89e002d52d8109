"""The one rule for which episodes count: every reader of records asks here.

An episode is *errored* when it ended in ``infra_error`` (a bug or broken invariant in the
sandbox, an adapter or a harness), ``model_error`` (the provider failed after retries) or
``timeout`` (the episode ran past its wall-clock limit, ``--episode-timeout``). None of these
says anything about the agent: the first two are failures of something else, and a wall-clock
timeout depends on the machine's speed and load, not on the simulated world (the world's own
time cap is ``time_limit``, which *is* the agent's doing and is rated). So an errored episode is
counted — in every summary, table note and gate — but its outcome never enters a rate.

An episode is *rated* when the fault fired (the agent reached the focal write; with fault
``none`` it always has) and it is not errored. Rates — duplicates, task success, exactly-once,
overclaim — are shares of rated episodes.

The run summary (:mod:`limbo.run.summary`), ``limbo status``, ``limbo check``, the analysis loader
(and so every table, figure and the HTML report) and the Inspect scorer all use these two
functions; ``tests/test_rated_rule.py`` runs every termination through each of them.
"""

from __future__ import annotations

ERRORED: tuple[str, ...] = ("infra_error", "model_error", "timeout")
"""The terminations that say nothing about the agent (see the module docstring)."""


def errored(termination: str) -> bool:
    """Whether an episode that ended with ``termination`` is an error, not a measurement."""
    return termination in ERRORED


def rated(fault_fired: bool, termination: str) -> bool:
    """Whether an episode enters rates: the fault fired and the episode is not errored."""
    return bool(fault_fired) and not errored(termination)
