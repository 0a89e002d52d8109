"""Errors for the two audiences that are not the agent.

The agent sees structured tool results (:mod:`limbo.sim.results`), never these. A
:class:`UsageError` is something the user can fix: the CLI prints its message on one line and
exits non-zero without a traceback. An :class:`InfraError` is a broken invariant inside the
sandbox: the episode ends with termination ``infra_error`` and the reason is recorded.
"""

from __future__ import annotations


class UsageError(Exception):
    """A user-facing problem: bad flag, unknown name, bad grid file, missing dependency."""


class InfraError(Exception):
    """The sandbox itself failed; the episode is recorded as ``infra_error``."""


class ModelError(Exception):
    """The model provider failed after retries; the episode is recorded as ``model_error``."""
