"""What a pass spent beside what was forecast for it, for ``limbo status``.

A pass of a real-model grid records its forecast in its manifest as it starts (``forecast``:
dollars, model calls, wall seconds, each with a 95 % interval; :mod:`limbo.run.forecast`) and
what it spent as it ends (``actual``). While it runs — or after it died — what it has spent so
far is read from its records file, from where the pass began writing (``records_offset``):
each record's ``runtime.model_calls`` says what the provider billed for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from limbo.base.words import duration, plural
from limbo.log.reader import Skip, decode, lines
from limbo.log.store import episodes_file
from limbo.run.summary import Tally, tallied


def spent(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """What the manifest's pass spent: its ``actual``, else its records so far; ``None`` for
    a pass that forecast nothing."""
    if not isinstance(manifest.get("forecast"), dict):
        return None
    actual = manifest.get("actual")
    if isinstance(actual, dict):
        return actual
    raw = manifest.get("shard")
    shard = (int(raw[0]), int(raw[1])) if isinstance(raw, list) and len(raw) == 2 else None
    return {**_so_far(episodes_file(run_dir, shard), int(manifest.get("records_offset") or 0)),
            "wall_s": None}


def _so_far(path: Path, offset: int) -> dict[str, Any]:
    tally = Tally()
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            for line in lines(fh):
                record = decode(line.raw)
                if not isinstance(record, Skip):  # a bad line: status lists it apart
                    tally.add(tallied(record)[1])
    except FileNotFoundError:
        pass
    return tally.actual()


def spend_line(forecast: dict[str, Any], actual: dict[str, Any]) -> str:
    """``forecast $A [lo, hi] ...; spent $B ...``, saying whether each fell in its interval."""
    parts = [_part("cost", forecast.get("usd"), actual.get("usd"), lambda v: f"${v:.4g}"),
             _part("model calls", forecast.get("calls"), actual.get("calls"),
                   lambda v: f"{v:,.0f}"),
             _part("wall time", forecast.get("wall_s"), actual.get("wall_s"), duration)]
    done = f" ({plural(int(actual.get('episodes') or 0), 'episode')})"
    return "spent vs forecast" + done + ": " + "; ".join(p for p in parts if p)


def _part(what: str, forecast: Any, actual: Any, fmt: Any) -> str:
    if not isinstance(forecast, dict):
        return ""
    est, low, high = forecast.get("estimate"), forecast.get("low"), forecast.get("high")
    shown = fmt(est) + (f" [{fmt(low)}, {fmt(high)}]" if low is not None else "")
    if not isinstance(actual, int | float):
        return f"{what} forecast {shown}, spent not known yet"
    where = ("" if low is None or high is None else
             " — inside" if low <= actual <= high else " — OUTSIDE")
    return f"{what} {fmt(actual)} of {shown}{where}"
