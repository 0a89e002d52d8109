"""Real-model grids bounded by the provider, not by our client: ``limbo run`` against a paced
loopback endpoint (``tests/support/paced.py``, in its own process) that answers every
request after ``--latency`` seconds, through the real SDK adapters.

    python benchmarks/bench_providers.py [--episodes 512] [--latency 0.5]
        [--concurrency 8 64 128] [--apis responses chat messages] [--rate-limit 16]

Each episode makes exactly two model calls (``wait``, then ``finish``), so the ideal wall time
at concurrency ``c`` is ``episodes * 2 * latency / c``; efficiency = ideal / run wall, where the
run wall is the run as ``limbo run`` reports it (``in N s``: from opening the run directory to
the last record). The command wall beside it is the whole ``limbo run`` call (imports, checks,
summary too); the commands run in this process, so the first of each API also pays for
importing its SDK, about a second, and the later ones do not. With ``--rate-limit N``
the endpoint answers at most N requests at a time and ``429`` + ``Retry-After: 1`` beyond, so
the run can go no faster than ``episodes * 2 * latency / N``; the benchmark prints the ratio
of the wall time to that, the 429s the endpoint sent, and the episodes that ended in
``model_error``.

Prints figures; asserts nothing (tests never time anything). On a shared machine the figures
move with the other load: run it more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import logging
import multiprocessing
import re
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the paced endpoint

from support.paced import Pace, PacedServer

SPECS = {"responses": "openai/paced?base_url={url}/v1",
         "chat": "openai/paced?api=chat&base_url={url}/v1",
         "messages": "anthropic/paced?base_url={url}"}


def _serve(pace: Pace, conn: Any) -> None:
    async def main() -> None:
        server = PacedServer(pace)
        await server.start()
        conn.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
        await server.stop()

    asyncio.run(main())


@contextlib.contextmanager
def endpoint(pace: Pace) -> Iterator[str]:
    """The paced endpoint in a process of its own (its CPU is not the client's)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(pace, child), daemon=True)
    proc.start()
    port = parent.recv()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        parent.send("stop")
        proc.join(10)


def stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
        return json.load(response)  # type: ignore[no-any-return]


@dataclass
class Measured:
    command_s: float
    """The whole ``limbo run`` command in this process (grid expansion, checks, summary)."""
    run_s: float
    """The run itself, as ``limbo run`` reports it (``in N s``)."""
    cpu_s: float
    """This process's CPU time during the command."""
    ends: Counter[str]


def run(spec: str, episodes: int, concurrency: int, profile: str | None) -> Measured:
    """One ``limbo run`` of ``episodes`` cells."""
    from limbo.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        argv = ["run", "default", "--model", spec, "--instances", "4", "--limit", str(episodes),
                "--concurrency", str(concurrency), "--out", str(out), "--no-cache", "--quiet"]
        text = io.StringIO()
        start, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(text):
            code = _profiled(lambda: main(argv), profile)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        if code != 0:
            raise SystemExit(f"limbo run failed with exit code {code}:\n{text.getvalue()}")
        ends: Counter[str] = Counter()
        for path in out.glob("episodes*.jsonl"):
            for line in path.read_text().splitlines():
                ends[json.loads(line)["outcome"]["termination"]] += 1
    said = re.search(r"episodes, .* in ([0-9.]+)s", text.getvalue())
    return Measured(wall, float(said.group(1)) if said else wall, cpu, ends)


def _profiled(call: Any, profile: str | None) -> Any:
    if profile is None:
        return call()
    import cProfile

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(call)
    finally:
        profiler.dump_stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 128])
    parser.add_argument("--apis", nargs="+", default=list(SPECS), choices=list(SPECS))
    parser.add_argument("--rate-limit", type=int, help="the endpoint's requests in flight cap")
    parser.add_argument("--profile", help="write a cProfile of each run to PREFIX-<api>-<c>.prof")
    args = parser.parse_args()
    logging.getLogger("limbo.providers").setLevel(logging.ERROR)  # a retry line per 429
    pace = Pace(latency_s=args.latency, max_in_flight=args.rate_limit)
    calls = 2 * args.episodes
    print(f"{args.episodes} episodes x 2 model calls, {args.latency:g} s latency"
          + (f", endpoint cap {args.rate_limit} in flight (429 + Retry-After: 1 beyond)"
             if args.rate_limit else ""))
    print("| API | --concurrency | run wall | ideal | efficiency | command wall (efficiency) "
          "| client CPU per call | 429s | peak in flight | model_error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for api in args.apis:
        for c in args.concurrency:
            with endpoint(pace) as url:
                profile = f"{args.profile}-{api}-{c}.prof" if args.profile else None
                m = run(SPECS[api].format(url=url), args.episodes, c, profile)
                seen = stats(url)
            ideal = calls * args.latency / min(c, args.rate_limit or c)
            print(f"| {api} | {c} | {m.run_s:.1f} s | {ideal:.1f} s | {100 * ideal / m.run_s:.0f} % "
                  f"| {m.command_s:.1f} s ({100 * ideal / m.command_s:.0f} %) "
                  f"| {1000 * m.cpu_s / calls:.1f} ms | {seen['refused']} "
                  f"| {seen['peak_in_flight']} | {m.ends.get('model_error', 0)} |", flush=True)
            if sum(m.ends.values()) != args.episodes or seen["answered"] != calls:
                print(f"  (unexpected: terminations {dict(m.ends)}, answered {seen['answered']})")


if __name__ == "__main__":
    main()
