"""A confidence sequence for the mean of bounded observations: an interval at every n that holds
the mean at all n at once with probability ≥ 1 − α, so it may be looked at after every
observation and the sampling stopped whenever it is narrow enough (``limbo run --precision``).

A fixed-n interval recomputed after each new observation does not keep its coverage under such
peeking: the chance that it excludes the mean at *some* look grows with the number of looks.
This is the hedged betting construction of Waudby-Smith & Ramdas (2023, "Estimating means of
bounded random variables by betting", JRSS-B, §4, the hedged capital process with predictable
plug-in bets). For a candidate mean m, a gambler bets λ_i(x_i − m) on each observation, up and
down: K⁺_n(m) = Π (1 + λ⁺_i(m)(x_i − m)) and K⁻_n(m) = Π (1 − λ⁻_i(m)(x_i − m)). Under m = μ
both are nonnegative martingales starting at 1 (the bets are chosen before x_i is seen, and
capped, λ⁺ ≤ c/m and λ⁻ ≤ c/(1 − m), so no factor reaches 0), and so is their average; by
Ville's inequality it exceeds 1/α at some n with probability at most α. The sequence is
C_n = {m : max(θK⁺_n(m), (1 − θ)K⁻_n(m)) < 1/α}, θ = ½, intersected over n.

Any bet fixed before x_i is seen keeps that guarantee; the choice only decides where the
sequence is narrowest. Without a target the bets are the paper's predictable plug-in,
λ_i = √(2 log(2/α) / (σ̂²_{i−1} · i · log(1 + i))), good at every n. Sampling until a half-width
h is reached asks something narrower: to reject the candidates at distance h from the mean as
early as possible. The bet that makes a candidate m's capital grow fastest is (μ − m)/σ²
(Kelly: maximise E log(1 + λ(x − m)) ≈ λ(μ − m) − λ²σ²/2), so with a ``target`` h the bets are
λ_i = h / σ̂²_{i−1}: they reach half-width h after about 2σ² log(2/α)/h² observations, where the
plug-in bets need about 1.8 times as many (both ≈ 2 to 4 times a fixed-n interval's, the
price of looking after every observation). Here σ̂²_i = (¼ + Σ_{j≤i} (x_j − μ̂_j)²) / (i + 1),
μ̂_i = (½ + Σ_{j≤i} x_j) / (i + 1), and c = ½. The capitals are kept on a grid of candidate
means (steps of 1/GRID); an interval end is moved out by one step, so the grid never narrows
the sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GRID = 1000
"""Candidate means 0, 1/GRID, ..., 1: the interval's ends are multiples of 1/GRID."""
BET_CAP = 0.5
"""c: the largest fraction of the capital a bet may risk."""
RULE = ("95% betting confidence sequence (Waudby-Smith & Ramdas 2023, hedged capital process), "
        "valid at every n")


@dataclass
class BettingCS:
    """The sequence for observations in [0, 1], updated one observation at a time."""

    alpha: float = 0.05
    target: float | None = None
    """The half-width the bets aim at (``None``: the plug-in bets, good at every n)."""
    grid: int = GRID
    n: int = 0
    total: float = 0.0
    lo: float = 0.0
    hi: float = 1.0
    _log_up: list[float] = field(default_factory=list, repr=False)
    _log_down: list[float] = field(default_factory=list, repr=False)
    _squares: float = 0.25
    _mu_hat: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        self._log_up = [0.0] * (self.grid + 1)
        self._log_down = [0.0] * (self.grid + 1)

    @property
    def mean(self) -> float:
        """The mean of the observations so far (NaN before the first)."""
        return self.total / self.n if self.n else math.nan

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def bet(self) -> float:
        """λ for the next observation, from the observations before it."""
        t = self.n + 1
        variance = self._squares / t  # σ̂²_{t−1}
        if self.target is not None:
            return self.target / variance
        return math.sqrt(2 * math.log(2 / self.alpha) / (variance * t * math.log(1 + t)))

    def update(self, x: float) -> None:
        """Take one observation in [0, 1]."""
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"observations must lie in [0, 1], got {x}")
        lam, g = self.bet(), self.grid
        up, down = self._log_up, self._log_down
        for i in range(g + 1):  # at m = 0 (m = 1) the up (down) bet cannot lose: no cap
            m = i / g
            d = x - m
            up[i] += math.log1p((min(lam, BET_CAP / m) if i else lam) * d)
            down[i] += math.log1p(-(min(lam, BET_CAP / (1 - m)) if i < g else lam) * d)
        self.n += 1
        self.total += x
        self._squares += (x - self._mu_hat) ** 2
        self._mu_hat = (0.5 + self.total) / (self.n + 1)
        self._narrow()

    def _narrow(self) -> None:
        """Intersect the interval with this n's set {m : hedged capital < 1/α}."""
        bound = math.log(1 / self.alpha)
        half = math.log(0.5)
        capital = [half + max(u, d) for u, d in zip(self._log_up, self._log_down, strict=True)]
        inside = [i for i, c in enumerate(capital) if c < bound]
        if not inside:  # the set fell between grid points: keep the step around its least capital
            least = min(range(len(capital)), key=capital.__getitem__)
            inside = [least]
        lo = max(0.0, (inside[0] - 1) / self.grid)
        hi = min(1.0, (inside[-1] + 1) / self.grid)
        if lo <= self.hi and hi >= self.lo:  # an empty intersection would say nothing: keep n's
            lo, hi = max(lo, self.lo), min(hi, self.hi)
        self.lo, self.hi = lo, hi
