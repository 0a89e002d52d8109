"""Paired binary outcomes: McNemar's test, and the tests that treat the world as the unit.

Two arms are paired episode by episode (``limbo.analysis.pairing``). The exact McNemar test
counts every discordant pair as independent evidence; but the pairs of one world share its task
text and tools and often disagree the same way, so twelve discordant pairs from three worlds are
not twelve independent coin flips. The clustered tests of ``reference/stats.md`` §8 take each
world's net discordance d_k = b_k − c_k as the unit:

* the **sign-flip permutation test** (primary): under H0 each world's d_k is as likely to have
  either sign, so |Σ d_k| is compared with its distribution over all 2^G sign flips — exact,
  by convolving the worlds' two-point distributions over the integers (up to 1,000 worlds with
  d_k ≠ 0 and G·Σ|d_k| ≤ 2·10⁷), else by seeded Monte Carlo, whose floor is shown as a bound;
* **Durkalski's statistic** X² = (Σ d_k)² / Σ d_k², ≈ χ²₁ when enough worlds discord.

With one discordant pair per world both reduce to McNemar: the sign-flip p to the exact test,
X² to the uncorrected χ², (b − c)² / (b + c). Holm's adjustment is applied to each kind of
p-value separately — clustered and unclustered are two readings of one family, not one family.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from limbo.analysis.labels import cluster_codes
from limbo.base.rng import derive_seed

Array = np.ndarray
EXACT_WORK = 20_000_000
"""The exact null distribution costs about G·Σ|d_k| operations (G worlds with d_k ≠ 0): 500
worlds with |d_k| ≤ 80, or 30 worlds with |d_k| up to 20,000, take well under a second."""
EXACT_WORLDS = 1000
"""Beyond this many worlds a probability 2^−G can underflow float64: Monte Carlo instead."""
MC_REPLICATES = 100_000
"""Monte Carlo sign flips beyond that: the p-value's Monte Carlo SE is then ≤ 0.0016."""
_MC_ENTRIES = 4_000_000
"""Signs drawn per block (32 MB as float64), whatever the number of worlds."""


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on paired binary outcomes."""

    b: int
    """Pairs with the outcome under A only."""
    c: int
    """Pairs with the outcome under B only."""
    statistic: float
    pvalue: float


def mcnemar_exact(b: int, c: int) -> McNemar:
    """Exact (binomial) McNemar: p = min(1, 2·BinomCDF(min(b, c); b + c, ½)); p = 1 when
    there is no discordant pair (b + c = 0), where scipy's binomtest would raise."""
    if b + c == 0:
        return McNemar(b, c, 0.0, 1.0)
    return McNemar(b, c, float(min(b, c)), min(1.0, 2.0 * half_binomial_cdf(min(b, c), b + c)))


EXACT_UP_TO = 20_000
"""Most trials :func:`half_binomial_cdf` counts exactly (a few milliseconds at this size)."""


def half_binomial_cdf(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, ½): Σ_{i ≤ k} C(n, i) / 2ⁿ in integers, then one correctly
    rounded division — exact to the last bit, and without importing scipy.stats (0.5 s of CPU,
    :mod:`.dist`), which is used only past :data:`EXACT_UP_TO` trials."""
    if n > EXACT_UP_TO:
        from scipy.stats import binom

        return float(binom.cdf(k, n, 0.5))
    term = total = 1
    for i in range(1, k + 1):
        term = term * (n - i + 1) // i
        total += term
    return total / (1 << n)


def discordant(a: Sequence[bool] | Array, b: Sequence[bool] | Array) -> tuple[int, int]:
    """(b, c) of paired outcomes: pairs true under ``a`` only, and under ``b`` only."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    return int((a & ~b).sum()), int((~a & b).sum())


def holm(pvalues: Sequence[float] | Array) -> Array:
    """Holm's step-down adjustment: sorted ascending, adj₍ᵢ₎ = min(1, maxⱼ≤ᵢ (m − j + 1)·p₍ⱼ₎),
    mapped back to the input order — what ``multipletests(method="holm")`` computes (not
    its default, Holm–Šidák). NaN entries stay NaN and are not counted in the family size m."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def world_discordance(a: Sequence[bool] | Array, b: Sequence[bool] | Array,
                      clusters: Sequence[Any] | Array) -> tuple[Array, Array]:
    """Per world (in sorted order of the labels): b_k, the pairs true under ``a`` only, and
    c_k, those true under ``b`` only."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    codes, k = cluster_codes(clusters, len(a))
    return (np.bincount(codes, a & ~b, k).astype(np.int64),
            np.bincount(codes, ~a & b, k).astype(np.int64))


def durkalski(d: Sequence[int] | Array) -> tuple[float, float]:
    """Durkalski's clustered McNemar statistic X² = (Σ d_k)² / Σ d_k² and its χ²₁ p-value;
    (0, 1) when no world discords."""
    d = np.asarray(d, dtype=float)
    spread = float((d * d).sum())
    if spread == 0:
        return 0.0, 1.0
    x2 = float(d.sum()) ** 2 / spread
    return x2, float(special.chdtrc(1, x2))  # chi2.sf(x2, 1) is this call, bit for bit


@dataclass(frozen=True)
class SignFlip:
    """The sign-flip permutation test of Σ d_k = 0."""

    statistic: int
    """T = |Σ d_k|."""
    worlds: int
    """G, the worlds with d_k ≠ 0 (the others cannot flip)."""
    pvalue: float
    exact: bool
    """The exact distribution over all 2^G flips; otherwise MC_REPLICATES seeded Monte Carlo
    flips."""
    bound: bool = False
    """Monte Carlo saw no flip as extreme as the data: ``pvalue`` is its floor 1/(B + 1), an
    upper bound, and is shown as one ("< 1e-05")."""


def sign_flip(d: Sequence[int] | Array, seed: int | str = 0) -> SignFlip:
    """P(|Σ s_k d_k| ≥ |Σ d_k|) over independent signs s_k = ±1: exact — the distribution of
    Σ s_k d_k convolved world by world over the integers (ties counted: ≥) — for up to
    EXACT_WORLDS worlds with d_k ≠ 0 and G·Σ|d_k| up to EXACT_WORK, else (1 + #{|T*| ≥ T}) /
    (B + 1) over B = MC_REPLICATES flips drawn from ``seed`` (the identity counted once, so p is
    never 0; at that floor p is a bound)."""
    values = np.asarray(d, dtype=np.int64)
    values = values[values != 0]
    t, g, sizes = int(abs(values.sum())), len(values), np.abs(values)
    if g and np.all(sizes == sizes[0]):
        return SignFlip(t, g, _equal_flips(t // int(sizes[0]), g), True)
    if g <= EXACT_WORLDS and g * int(sizes.sum()) <= EXACT_WORK:
        return SignFlip(t, g, _convolved(sizes, t), True)
    weights = values.astype(float)  # integer sums below 2^53: exact in float64
    rng = np.random.default_rng(derive_seed(seed, "analysis.sign_flip"))
    block = max(1, min(MC_REPLICATES, _MC_ENTRIES // g))
    hits = 0
    for start in range(0, MC_REPLICATES, block):
        signs = _signs(rng, min(block, MC_REPLICATES - start), g)
        hits += int(np.count_nonzero(np.abs(signs @ weights) >= t))
    return SignFlip(t, g, (1 + hits) / (MC_REPLICATES + 1), False, hits == 0)


def _convolved(sizes: Array, t: int) -> float:
    """P(|Σ s_k·sizes_k| ≥ t) for independent fair signs, by building the distribution of the
    sum one world at a time: an array over the integers −Σ|d| … Σ|d| of probabilities, each
    world moving half of it up and half down by its |d_k|. Every entry is a multiple of 2^−G
    held in float64 (exactly, for G ≤ 53; to a relative 1e-16 per world beyond)."""
    total = int(sizes.sum())
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    reach = 0
    for size in sizes.tolist():
        span = slice(total - reach, total + reach + 1)
        moved = dist[span] * 0.5
        dist[span] = 0.0
        dist[total - reach + size:total + reach + size + 1] += moved
        dist[total - reach - size:total + reach - size + 1] += moved
        reach += size
    sums = np.abs(np.arange(-total, total + 1))
    return float(min(1.0, dist[sums >= t].sum()))


def _equal_flips(ones: int, g: int) -> float:
    """The exact sign-flip p when every world's |d_k| is the same: Σ s_k d_k / |d| is
    2X − G with X ~ Binomial(G, ½), so p = P(|2X − G| ≥ ``ones``) — the exact McNemar p of
    (G + ones)/2 against (G − ones)/2, as the enumeration gives it, for any number of worlds
    (every pair its own cluster, ``--cluster none``, is this case)."""
    return mcnemar_exact((g + ones) // 2, (g - ones) // 2).pvalue


def _signs(rng: np.random.Generator, rows: int, columns: int) -> Array:
    """A rows × columns matrix of independent fair ±1 signs, from random bytes (8 per draw)."""
    raw = rng.integers(0, 256, size=(rows, (columns + 7) // 8), dtype=np.uint8)
    signs: Array = np.unpackbits(raw, axis=1, count=columns) * 2.0 - 1
    return signs


@dataclass(frozen=True)
class ClusteredMcNemar:
    """Paired binary outcomes tested with the world as the unit, beside the exact McNemar."""

    mcnemar: McNemar
    """The unclustered exact test (every pair independent), for comparison with the paper."""
    worlds: int
    """K, the worlds the pairs fall in."""
    sign_flip: SignFlip
    """The primary, clustered test."""
    durkalski: float
    """X² = (Σ d_k)² / Σ d_k²."""
    p_durkalski: float
    """Its χ²₁ p-value (needs a reasonable number of discordant worlds)."""


def clustered_mcnemar(a: Sequence[bool] | Array, b: Sequence[bool] | Array,
                      clusters: Sequence[Any] | Array, seed: int | str = 0) -> ClusteredMcNemar:
    """Both readings of paired outcomes ``a``/``b`` (one entry per pair) whose pairs fall in
    the worlds ``clusters``: the sign-flip test and Durkalski's X² on d_k = b_k − c_k, and the
    exact McNemar on the pooled b, c."""
    bk, ck = world_discordance(a, b, clusters)
    d = bk - ck
    x2, p = durkalski(d)
    return ClusteredMcNemar(mcnemar_exact(int(bk.sum()), int(ck.sum())), len(d),
                            sign_flip(d, seed), x2, p)


def holm_each(tests: Sequence[ClusteredMcNemar | None]) -> tuple[Array, Array, Array]:
    """Holm over one family of comparisons, applied to the sign-flip p-values and, separately,
    to the unclustered McNemar p-values; ``None`` (a comparison without pairs) stays NaN and is
    not counted in the family. The third array says which adjusted sign-flip p is a bound
    (:func:`holm_bounds`)."""
    flips = [np.nan if t is None else t.sign_flip.pvalue for t in tests]
    plain = [np.nan if t is None else t.mcnemar.pvalue for t in tests]
    adjusted, bound = holm_bounds(flips, [t is not None and t.sign_flip.bound for t in tests])
    return adjusted, holm(plain), bound


def holm_bounds(pvalues: Sequence[float], bounds: Sequence[bool]) -> tuple[Array, Array]:
    """Holm's adjustment of p-values some of which are upper bounds (a Monte Carlo floor), and
    which adjusted values are bounds: those whose step-down maximum is a bound's own scaled p
    (an upper bound times m − j + 1 is still an upper bound; a maximum set by an exact p is
    exact)."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = holm(p)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.full(p.shape, np.nan)
    scaled[order] = np.minimum(1.0, (len(order) - np.arange(len(order))) * p[order])
    with np.errstate(invalid="ignore"):
        own = scaled == adjusted
    return adjusted, np.asarray(bounds, dtype=bool) & own
