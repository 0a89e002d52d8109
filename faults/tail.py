"""The heavy tail of ``timeout_late_tail``: how long after the timeout a late request lands.

δ = 40 s + X with X ~ LogNormal(μ, σ), conditioned on δ ≤ 7200 s. The parameters put the
median at 300 s and P(δ ≤ 60 s), P(δ ≤ 120 s), P(δ ≤ 3600 s) at 0.12, 0.29 and 0.93 — the
P(δ ≤ Δ) column of the paper's Table 6. A draw is one uniform pushed through the inverse CDF of
the *truncated* law, so there is no rejection loop and exactly one number is taken from the
generator per draw (the fault's other draws never shift).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from limbo.base.rng import Rng

FLOOR_S = 40.0
CAP_S = 7200.0
MU = 5.8268
SIGMA = 2.2975

_X = NormalDist(MU, SIGMA)  # law of ln X
_MASS = _X.cdf(math.log(CAP_S - FLOOR_S))  # P(δ ≤ cap) before truncation


def cdf(delta: float) -> float:
    """P(δ ≤ ``delta``) under the truncated law."""
    if delta <= FLOOR_S:
        return 0.0
    if delta >= CAP_S:
        return 1.0
    return _X.cdf(math.log(delta - FLOOR_S)) / _MASS


def quantile(p: float) -> float:
    """The δ with P(δ ≤ δ_p) = ``p``, for 0 < p ≤ 1."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return min(CAP_S, FLOOR_S + math.exp(_X.inv_cdf(p * _MASS)))


def draw(rng: Rng) -> float:
    """One δ in seconds, from ``rng`` (exactly one uniform)."""
    return quantile(1.0 - rng.random())  # 1 - U lies in (0, 1]
