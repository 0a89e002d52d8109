"""Coverage of the world-clustered rate interval on simulated clustered binary data.

Each replicate is ``worlds`` clusters of ``episodes`` episodes; each world's own rate is drawn
from a beta distribution with mean ``rate`` and 1/(a + b + 1) = ``icc`` (the correlation of two
episodes of one world), and its episodes are Bernoulli at that rate. The intervals are computed
for all replicates at once through the same array functions ``clustered_rate`` uses.
"""

from __future__ import annotations

import numpy as np

from limbo.analysis.cluster import anova_icc, cluster_design_effect, wilson_interval

SEED = 20261203


def beta_binomial(rate: float, icc: float, replicates: int, worlds: int, episodes: int,
                  seed: int = SEED) -> np.ndarray:
    """Successes per world, replicates × worlds."""
    rng = np.random.default_rng(seed)
    a, b = rate * (1 - icc) / icc, (1 - rate) * (1 - icc) / icc
    hits: np.ndarray = rng.binomial(episodes, rng.beta(a, b, size=(replicates, worlds)))
    return hits


def intervals(hits: np.ndarray, episodes: int, known_icc: float | None = None
              ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per replicate, the 95% interval clustered by world (ρ estimated, or ``known_icc``) and
    the one that counts every episode ("none")."""
    sizes = np.full(hits.shape, episodes)
    n = sizes.sum(axis=1)
    rate = hits.sum(axis=1) / n
    rho = anova_icc(hits, sizes)[0] if known_icc is None else np.full(len(hits), known_icc)
    n_eff = n / cluster_design_effect(rho, sizes)
    return {"world": wilson_interval(rate * n_eff, n_eff), "none": wilson_interval(rate * n, n)}


def coverage(rate: float, icc: float = 0.3, replicates: int = 2000, worlds: int = 30,
             episodes: int = 20, known_icc: bool = False) -> dict[str, float]:
    """Share of replicates whose interval contains ``rate``, by clustering."""
    hits = beta_binomial(rate, icc, replicates, worlds, episodes)
    found = intervals(hits, episodes, icc if known_icc else None)
    return {name: float(((lo <= rate) & (rate <= hi)).mean()) for name, (lo, hi) in found.items()}
