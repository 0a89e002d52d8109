"""How often must-show 2 of issue 39 can hold: a ``--precision`` estimate inside the full
grid's interval, on ``examples/precision.toml`` run for real and simulated.

The precision run's worlds are the first n of the grid's W in a seeded random order, so its
estimate is the mean of a simple random sample of the full grid's worlds; it differs from the
full grid's mean by about σ·√(1/n − 1/W), against a full-grid half-width of 1.96·σ/√W. It lands
inside with probability about P(|Z| ≤ 1.96 / √(W/n − 1)) whatever the stopping rule; the rule
adds only that n is chosen by the data (an arm whose worlds look less variable stops sooner).
:func:`odds` separates the two: the stopped estimate beside the mean of the same number of
worlds drawn independently of the data.

The simulation draws as the example runs: ``policy/noisy`` is blind when one uniform number per
task (template, focal write, instance) falls below ``p_blind``, the same number in every arm, so
a world's two focal writes draw apart (world rates 0, ½ or 1) and the arms are nested.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import norm

from limbo.analysis.cluster import clustered_rate
from support.sequential_sim import sequence

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "precision.toml"
_GRID = tomllib.loads(EXAMPLE.read_text())
RATES = tuple(float(model.split("p_blind=")[1]) for model in _GRID["models"])
"""Each arm's ``p_blind``, as the example states it."""
WORLDS: int = _GRID["instances"]
EPISODES = 2 * len(RATES) * WORLDS
"""The full grid's episodes: two focal writes per world and arm."""


@dataclass(frozen=True)
class ArmOdds:
    """One arm of :func:`odds`: shares of replicates, and the worlds used."""

    rate: float
    worlds: float
    """Mean worlds until the stop."""
    inside: float
    """The stopped estimate inside the full grid's interval."""
    below: float
    above: float
    inside_fixed: float
    """The mean of as many worlds, their number drawn apart from these worlds' outcomes."""
    formula: float
    """P(|Z| ≤ 1.96 / √(W/n − 1)), averaged over the stops."""
    held: float
    """The sequence at the stop holds the rate."""
    full_held: float
    """The full grid's interval holds the rate."""


@dataclass(frozen=True)
class Odds:
    arms: tuple[ArmOdds, ...]
    inside: float
    """Every arm's estimate inside its full grid's interval."""
    saving: float
    """Mean share of the grid's episodes not run."""
    short: float
    """Share of replicates saving less than 30%."""
    exhausted: float
    """Share of replicates where some arm ran out of worlds."""


def odds(rng: np.random.Generator, reps: int, rates: tuple[float, ...] = RATES,
         worlds: int = WORLDS, writes: int = 2, target: float = 0.05) -> Odds:
    """``reps`` replicates of the example's design, every arm stopped as ``--precision``
    stops it and compared with the full grid's world-clustered interval (the tables')."""
    u = rng.random((reps, worlds, writes))
    clusters = np.repeat(np.arange(worlds), writes)
    rows, found, stops, inside, exhausted = np.arange(reps), [], [], [], np.zeros(reps, bool)
    for rate in rates:
        y = (u < rate).astype(float)
        x = y.mean(axis=2)
        lo, hi = sequence(x, target=target)
        narrow = (hi - lo) <= 2 * target
        exhausted |= ~narrow.any(axis=1)
        n = np.where(narrow.any(axis=1), narrow.argmax(axis=1), worlds - 1) + 1
        estimate = _first(x, n)
        fixed = _first(x, rng.permutation(n))
        full = [clustered_rate(y[r].ravel(), clusters) for r in rows]
        flo, fhi = np.array([f.lo for f in full]), np.array([f.hi for f in full])
        ok = (flo <= estimate) & (estimate <= fhi)
        with np.errstate(divide="ignore"):
            z = 1.96 / np.sqrt(worlds / n - 1)
        stop = n - 1
        found.append(ArmOdds(
            rate, float(n.mean()), float(ok.mean()), float((estimate < flo).mean()),
            float((estimate > fhi).mean()), float(((flo <= fixed) & (fixed <= fhi)).mean()),
            float((2 * norm.cdf(z) - 1).mean()),
            float(((lo[rows, stop] <= rate) & (rate <= hi[rows, stop])).mean()),
            float(((flo <= rate) & (rate <= fhi)).mean())))
        stops.append(n)
        inside.append(ok)
    run = np.sum(stops, axis=0) / (worlds * len(rates))
    return Odds(tuple(found), float(np.all(inside, axis=0).mean()), float(1 - run.mean()),
                float((run > 0.7).mean()), float(exhausted.mean()))


def _first(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Each replicate's mean of its first ``n`` worlds."""
    taken = np.arange(x.shape[1])[None, :] < n[:, None]
    mean: np.ndarray = (x * taken).sum(axis=1) / n
    return mean


@dataclass(frozen=True)
class Against:
    """One arm of a precision run beside the full grid of the same seed."""

    model: str
    worlds: int
    status: str
    estimate: float
    full: float
    lo: float
    hi: float
    """The full grid's 95% interval, clustered by world, as the tables print it."""
    held: bool
    """The arm's sequence holds the rate ``policy/noisy`` states (its ``p_blind``)."""

    @property
    def inside(self) -> bool:
        return self.lo <= self.estimate <= self.hi


def precision_facts(run: Path) -> dict:
    facts: dict = json.loads((run / "manifest.json").read_text())["precision"]
    return facts


def against_full(full: Path, precise: Path) -> list[Against]:
    """Each arm of ``precise`` beside the full grid ``full``'s rate for that model."""
    from limbo.analysis.data import Data
    from limbo.analysis.loader import load

    data, found = Data(load([full]), weighting="none"), []
    for arm in precision_facts(precise)["arms"]:
        model = arm["arm"]["model"]
        whole = data.rate(data.rated[data.rated["model"].astype(str) == model], "duplicate")
        stated = float(model.split("p_blind=")[1])
        found.append(Against(model, arm["worlds"], arm["status"], arm["estimate"], whole.rate,
                             whole.lo, whole.hi, arm["lo"] <= stated <= arm["hi"]))
    return found
