"""A declared write's round trip, drawn per call from the episode's ``latency`` generator.

A fixed number, a uniform range, or a log-normal with a cap (slow writes are heavy-tailed).
Each draw takes exactly one uniform from the generator, so a draw never shifts another's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

from limbo.base.rng import Rng
from limbo.sim.worldfile.format import Latency, LogNormal, Uniform

Draw = Callable[[Rng], float]


def latency_of(spec: Latency | None) -> Draw | None:
    """How to draw a call's round trip in seconds (``None``: the grid's ``timing``)."""
    if spec is None:
        return None
    if isinstance(spec, Uniform):
        low, high = spec.min, spec.max
        return lambda rng: low + (high - low) * rng.random()
    if isinstance(spec, LogNormal):
        return _lognormal(spec)
    fixed = float(spec)
    return lambda rng: fixed


def _lognormal(spec: LogNormal) -> Draw:
    law = NormalDist(math.log(spec.median), spec.sigma)
    mass = law.cdf(math.log(spec.max))  # the cap truncates the law; one uniform per draw

    def draw(rng: Rng) -> float:
        u = (1.0 - rng.random()) * mass  # in (0, mass]
        return min(spec.max, math.exp(law.inv_cdf(min(u, 1.0 - 1e-16))))

    return draw
