"""Which cells cost real time or money: those whose model calls a provider, and those whose
harness starts a real process. The plan line, the forecast and the early stop ask here."""

from __future__ import annotations

import functools


@functools.cache
def calls_a_provider(spec: str) -> bool:
    """Whether ``spec``'s adapter calls a model (not a reference policy, script or replay:
    those say ``offline = True``)."""
    from limbo.base.registry import lookup
    from limbo.episode.models import parse_model

    return not getattr(lookup("model", parse_model(spec)[0]), "offline", False)


@functools.cache
def harness_median(name: str) -> float | None:
    """The measured median seconds per episode of harness ``name`` when it runs a real
    process; ``None`` for a harness that runs in this process (the minimal loop)."""
    from limbo.base.registry import lookup

    value = getattr(lookup("harness", name), "median_wall_s", None)
    return float(value) if isinstance(value, int | float) else None
