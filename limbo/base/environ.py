"""The environment a run's episodes read their configuration from: the process's own, or the
one their executor bound for them.

User configuration — an API key, ``LIMBO_CACHE_DIR`` — is read from the environment at the
edge: by ``limbo run`` as it starts, and by an adapter as it is built. A Ray worker on another
machine has none of the driver's variables, and writing them into its ``os.environ`` would
make every later run of that process see them (a setting carried by a global). So the driver
sends the variables its episodes need with each run (:class:`limbo.run.ray.worker.Setup`) and
the worker binds them around that run's episodes (:func:`bound`, a context variable the
episodes' tasks inherit); :func:`getenv` reads them there first, then the process's own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

_bound: ContextVar[Mapping[str, str] | None] = ContextVar("limbo_environ", default=None)


def getenv(name: str) -> str | None:
    """``name``'s value in the bound environment, else in this process's."""
    values = _bound.get()
    if values is not None and name in values:
        return values[name]
    return os.environ.get(name)


def bound_values() -> Mapping[str, str]:
    """The variables bound for the episodes running here (empty outside a run that bound
    any): also secrets to scrub (:mod:`limbo.base.secrets`)."""
    return _bound.get() or {}


@contextlib.contextmanager
def bound(values: Mapping[str, str]) -> Iterator[None]:
    """Bind ``values`` for the code (and the tasks it starts) inside the block."""
    token = _bound.set(dict(values))
    try:
        yield
    finally:
        _bound.reset(token)
