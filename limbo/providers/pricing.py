"""Prices per million tokens, and the cost of one call.

The table ships as data (``prices.toml`` next to this module); users add or override entries
with their own TOML files — listed in ``LIMBO_PRICES`` (``:``-separated), chosen by the run the
episodes belong to (``--prices``, bound around them by :func:`limbo.providers.options.using`),
or passed as the model parameter ``prices=PATH``.
An unknown model costs ``None``: unknown, which the tables must show as unknown, never as free.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from limbo.base.environ import getenv
from limbo.base.errors import UsageError
from limbo.providers.options import current
from limbo.providers.wire import Tokens

ENV = "LIMBO_PRICES"
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def cost(self, t: Tokens) -> float:
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        plain = max(0, t.input - t.cached - t.cache_write)
        usd = plain * self.input + t.cached * cached + t.cache_write * write + t.output * self.output
        return round(usd / 1_000_000, 10)


def check_price_file(path: str | os.PathLike[str]) -> None:
    """Read ``path`` as a price file: a :class:`UsageError` naming what is wrong, before a run
    that would meet it only in its first episode."""
    _read(Path(path))


def _read(path: Path) -> dict[str, Price]:
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc
        raise UsageError(f"cannot read price file {str(path)!r}: {reason}") from None
    return {name: _price(name, entry, path) for name, entry in data.items()}


def _price(name: str, entry: Any, path: Path) -> Price:
    """One entry: USD per million tokens, each a finite amount >= 0 (a negative or NaN price
    would let a run spend past ``--max-cost``)."""
    expected = "expected input, output and optionally cached_input, cache_write"
    if not isinstance(entry, dict):
        raise UsageError(f"price file {str(path)!r}: entry {name!r} is not a table; {expected}")
    values = {}
    for key, value in entry.items():
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 <= value < math.inf:
            raise UsageError(f"price file {str(path)!r}: bad entry {name!r}: {key} must be a "
                             f"finite amount of USD >= 0, got {value!r}")
        values[key] = float(value)
    try:
        return Price(**values)
    except TypeError as exc:
        raise UsageError(f"price file {str(path)!r}: bad entry {name!r} ({exc}); {expected}") from None


@cache
def _shipped() -> dict[str, Price]:
    text = resources.files("limbo.providers").joinpath("prices.toml").read_text()
    return {name: _price(name, e, Path("prices.toml")) for name, e in tomllib.loads(text).items()}


def table(extra: str | None = None) -> dict[str, Price]:
    """The shipped prices, overridden by ``LIMBO_PRICES`` files, the run's files
    (:func:`limbo.providers.options.current`), then ``extra``."""
    merged = dict(_shipped())
    chosen = current()
    files = [*(p for p in (getenv(ENV) or "").split(os.pathsep) if p),
             *(chosen.price_files if chosen is not None else ()), *([extra] if extra else [])]
    for path in map(Path, files):
        merged.update(_read(path))
    return merged


def price_for(spec: str, extra: str | None = None) -> Price | None:
    """The price of ``provider/model`` (a dated snapshot falls back to its undated name)."""
    prices = table(extra)
    return prices.get(spec) or prices.get(_DATED.sub("", spec))


def cost(price: Price | None, tokens: Tokens) -> float | None:
    """USD of one call; ``None`` when the price is unknown and tokens were spent."""
    if tokens.input == 0 and tokens.output == 0:
        return 0.0
    return None if price is None else price.cost(tokens)
