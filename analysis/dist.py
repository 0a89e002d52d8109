"""The normal and Student t functions the analysis uses — the numbers scipy.stats gives, without
importing scipy.stats or paying its per-call cost.

scipy.stats' ``norm`` and ``t`` are thin over scipy.special: once the generic wrapper has
checked the arguments, ``norm.ppf(q)`` is ``ndtri(q) * 1 + 0``, ``t.sf(x, df)`` is
``stdtr(df, -x)``, and so on. Calling the special functions directly gives the same double,
bit for bit (tests/test_dist.py compares them over a grid of arguments), at a small fraction
of the cost of a call — the tables make a few thousand — and importing scipy.special costs
a fifth of importing scipy.stats (about 0.15 against 0.7 s of CPU), which every analysis
command paid at start-up, also those that never reach a model fit (``limbo tables --table 0``,
``limbo figures``). An argument outside the open domain (q at 0 or 1 or beyond, an infinite
or NaN x, df ≤ 0, an array) goes to scipy.stats itself, so its edge rules hold unchanged.

``df=None`` is the standard normal; a number is Student's t with that many degrees of freedom.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import special


def _scalar(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _df_ok(df: float | None) -> bool:
    return df is None or (_scalar(df) and df > 0)


def ppf(q: float, df: float | None = None) -> Any:
    """The ``q`` quantile (scipy.stats' ``ppf``)."""
    if _scalar(q) and 0 < q < 1 and _df_ok(df):
        # scipy.stats places ``_ppf(q) * scale + loc``: the + 0.0 turns a -0.0 into 0.0 as it does
        return (special.ndtri(q) if df is None else special.stdtrit(df, q)) * 1.0 + 0.0
    return _stats(df).ppf(q, *_shape(df))


def sf(x: float, df: float | None = None) -> Any:
    """The upper tail P(X > x) (scipy.stats' ``sf``)."""
    if _scalar(x) and math.isfinite(x) and _df_ok(df):
        return special.ndtr(-x) if df is None else special.stdtr(df, -x)
    return _stats(df).sf(x, *_shape(df))


def cdf(x: float, df: float | None = None) -> Any:
    """The lower tail P(X ≤ x) (scipy.stats' ``cdf``)."""
    if _scalar(x) and math.isfinite(x) and _df_ok(df):
        return special.ndtr(x) if df is None else special.stdtr(df, x)
    return _stats(df).cdf(x, *_shape(df))


def _stats(df: float | None) -> Any:
    from scipy import stats

    return stats.norm if df is None else stats.t


def _shape(df: float | None) -> tuple[float, ...]:
    return () if df is None else (df,)
