"""How often the forecast's interval holds: varied real-model grids against a local priced
server, each forecast by ``limbo run --dry-run --pilot K`` and then run for real; the run's
manifest records the forecast it started from and what it spent, and this prints both.

    python benchmarks/bench_forecast.py [--grids 24] [--seed 1]

Each grid draws, from ``--seed``: a built-in grid (e1, e2, e6), one to three templates, a
subset of its faults (and conditions, for e2), one or two instances, a contract, one or two
models — each a reference policy behind the server (``forecast_agent.py``: verify, blind,
keyed, wait-verify) with its own tokenizer, verbosity, prompt-cache share, per-episode spread
and latency — a pilot of 3 to 8 cells per model, and 1, 2 or 4 episodes at once. The server
speaks Chat Completions through the real OpenAI SDK and is priced by a price file (``--prices``),
so the dollars are the adapter's own accounting. Nothing here knows the noise the forecast
must learn from its pilot.

Prints, per grid, the forecast (95 % intervals) and the actual cost, model calls and wall time
of the run that followed the pilot, and how often each interval held. Asserts nothing; the
commands run in this process (the first pays for importing the SDK).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the gateway the server is made of

from limbo.cli import main  # noqa: E402

PLUGIN = str(Path(__file__).resolve().parent / "forecast_agent.py")
PRICES = '["openai/gpt-test"]\ninput = 2.5\ncached_input = 1.25\noutput = 10.0\n'
TEMPLATES = ["charge_invoice", "record_signup", "open_incident", "refund_dispute",
             "send_receipt", "resolve_ticket", "escalate_comment", "sync_profile"]
FAULTS = ["none", "timeout_pre", "timeout_post", "timeout_late", "http500_post",
          "http500_pre", "redelivery", "phantom_success", "conn_reset_post", "stale_readback"]
CONDITIONS = ["vanilla", "aware", "rules", "guard", "vbr", "sdk-retry"]
POLICIES = ["verify", "blind", "keyed", "wait-verify"]


def draw(rng: random.Random) -> tuple[list[str], int, int]:
    """A grid's command-line arguments, its pilot size and its episodes at once."""
    grid = rng.choice(["e1", "e2", "e6"])
    args = [grid, "--instances", str(rng.choice([1, 1, 2]))]
    for t in rng.sample(TEMPLATES, rng.randint(1, 3)):
        args += ["--template", t]
    for f in rng.sample(FAULTS, rng.randint(2, 5)):
        args += ["--fault", f]
    if grid == "e2":
        for c in rng.sample(CONDITIONS, rng.randint(1, 3)):
            args += ["--condition", c]
    else:
        args += ["--contract", rng.choice(["native", "keys-everywhere"])]
    for policy in rng.sample(POLICIES, rng.randint(1, 2)):
        knobs = {"tpc": round(rng.uniform(0.2, 0.35), 3),
                 "verbosity": round(rng.uniform(10, 250)),
                 "cached": rng.choice([0.0, 0.5, 0.8]),
                 "spread": round(rng.uniform(0.05, 0.5), 2),
                 "latency_ms": round(rng.uniform(50, 300))}
        args += ["--model", f"bench/{policy}?" + "&".join(f"{k}={v}" for k, v in knobs.items())]
    return args, rng.randint(3, 8), rng.choice([1, 2, 4])


def one(args: list[str], pilot: int, at_once: int, folder: Path) -> dict[str, Any] | None:
    out = folder / "run"
    common = ["run", *args, "--plugin", PLUGIN, "--prices", str(folder / "prices.toml"),
              "--no-cache", "--quiet", "--out", str(out), "--concurrency", str(at_once)]
    (folder / "prices.toml").write_text(PRICES)
    for extra in (["--dry-run", "--pilot", str(pilot)], []):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(common + extra)
        if code != 0:
            raise SystemExit(f"limbo {' '.join(common + extra)} exited {code}:\n"
                             f"{printed.getvalue()}")
    manifest = json.loads((out / "manifest.json").read_text())
    if "forecast" not in manifest:  # the pilot ran every cell: nothing was left to forecast
        return None
    return {"forecast": manifest["forecast"], "actual": manifest["actual"],
            "cells": manifest["grid_cells"]}


def held(forecast: dict[str, Any] | None, actual: float | None) -> bool | None:
    if not forecast or actual is None or forecast.get("low") is None:
        return None
    return bool(forecast["low"] <= actual <= forecast["high"])


def row(i: int, got: dict[str, Any], pilot: int, at_once: int) -> tuple[str, list[bool | None]]:
    f, a = got["forecast"], got["actual"]
    checks = [held(f["usd"], a["usd"]), held(f["calls"], a["calls"]),
              held(f["wall_s"], a["wall_s"])]

    def cell(what: dict[str, Any], value: float, fmt: str, ok: bool | None) -> str:
        return (f"{format(what['estimate'], fmt):>8} [{format(what['low'], fmt)}, "
                f"{format(what['high'], fmt)}] {format(value, fmt):>8} {'ok' if ok else 'MISS'}")

    text = (f"{i:>3} {got['cells']:>5} {pilot:>3} {at_once:>3}  "
            f"{cell(f['usd'], a['usd'], '.4f', checks[0])}  "
            f"{cell(f['calls'], a['calls'], '.0f', checks[1])}  "
            f"{cell(f['wall_s'], a['wall_s'], '.1f', checks[2])}")
    return text, checks


def run(grids: int, seed: int) -> None:
    rng = random.Random(seed)
    print(f"{'#':>3} {'cells':>5} {'pil':>3} {'at1':>3}  {'forecast $ [95% interval] actual':<44}"
          f"{'calls':<34}wall s")
    tallies: list[list[bool | None]] = []
    widths: list[float] = []
    skipped = 0
    while len(tallies) < grids:
        args, pilot, at_once = draw(rng)
        with tempfile.TemporaryDirectory() as tmp:
            got = one(args, pilot, at_once, Path(tmp))
        if got is None:
            skipped += 1
            continue
        text, checks = row(len(tallies) + 1, got, pilot, at_once)
        print(text, flush=True)
        tallies.append(checks)
        usd = got["forecast"]["usd"]
        widths.append((usd["high"] - usd["low"]) / 2 / usd["estimate"])
    if skipped:
        print(f"({skipped} grids drawn were left out: their pilot ran every cell)")
    widths.sort()
    print(f"cost interval half-width, relative to the estimate: median {widths[len(widths) // 2]:.0%}"
          f", from {widths[0]:.0%} to {widths[-1]:.0%}")
    for k, what in enumerate(("cost", "model calls", "wall time")):
        judged = [t[k] for t in tallies if t[k] is not None]
        print(f"{what}: the 95 % interval held in {sum(judged)} of {len(judged)} grids "
              f"({100 * sum(judged) / max(len(judged), 1):.0f} %)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    ns = parser.parse_args()
    run(ns.grids, ns.seed)
