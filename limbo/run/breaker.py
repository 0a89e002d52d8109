"""Stop a run early when every recent episode failed the same way at the provider.

A server that fails every call turns each cell into a ``model_error`` after its full retry
budget (five attempts with backoff), one cell after another: 96 cells took 76 s to learn what
the first one already said. The rule: once the last :data:`STREAK` episodes of one model to end
in the run all ended in ``model_error`` with the same cause, and no episode of that model ended
otherwise in between, the run stops starting episodes (``--error-streak N`` changes N; 0 turns the rule off). Episodes
in flight end and are written; the manifest says ``stopped`` with the cause; the cells left —
the errored ones and those never started — run again with ``--retry-errors`` once the cause
is fixed.

The cause is the first line of the recorded reason with what changes from call to call masked
(:func:`cause_of`: request ids, long numbers), so that "HTTP 500 ... req_8a1f..." and "HTTP 500
... req_77c2..." are one cause. Only episodes of models that call a provider count, one way or
the other: a reference policy's episode says nothing about a provider, and a replay that
diverges or a script that runs out is not a provider down. The streak is kept per model (its
full spec, endpoint included): in a grid of two models whose cells interleave, one model's
provider down is not hidden by the other's episodes ending well between its failures.

The writer applies the rule to every record it receives, whatever the executor, and stops
handing out cells; forked workers also stop starting the cells they already hold (a shared
flag, :class:`limbo.run.forked.Forked`); a Ray worker finishes the batches it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from limbo.base.words import plural
from limbo.run.kinds import calls_a_provider

STREAK = 5
"""Episodes in a row, ended in ``model_error`` with one cause, that stop a run by default."""
MODEL_ERROR = "model_error"
_VARYING = re.compile(r"(?=[\w-]*\d)[\w-]{8,}")
"""A run of 8 or more word characters with a digit in it: an id, a timestamp, a long number."""


def cause_of(reason: object) -> str:
    """The cause a ``model_error`` reason names: its first line, ids masked."""
    from limbo.log.errored import first_line

    return _VARYING.sub("…", first_line(reason))


@dataclass
class Breaker:
    """The rule, fed each ended episode in the order the writer receives them."""

    streak: int = STREAK
    runs: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Per model: the cause of its current run of failures, and how many episodes it holds."""
    tripped: str | None = None
    """Why the run stops (set once, never cleared)."""

    def see(self, model: str, termination: str, reason: object) -> None:
        if self.tripped is not None or self.streak <= 0:
            return
        if not calls_a_provider(model):
            return  # it called no provider: it says nothing about one
        if termination != MODEL_ERROR:
            self.runs.pop(model, None)
            return
        cause = cause_of(reason)
        last, count = self.runs.get(model, (None, 0))
        count = count + 1 if cause == last else 1
        self.runs[model] = (cause, count)
        if count >= self.streak:
            self.tripped = (f"the last {plural(count, 'episode')} of {model.split('?')[0]} ended "
                            f"in {MODEL_ERROR} with the same cause: {cause}")
