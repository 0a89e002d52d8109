"""Real-model grids bounded by the provider, not by our client: ``limbo run`` against a paced
loopback endpoint, in its own process, that answers every request after ``--latency`` seconds,
through the real SDK adapters. Two endpoints: ``lean``, raw asyncio HTTP/1.1
(``tests/support/paced.py``), and ``plain``, the standard library's ``http.server`` with a thread
per connection (``tests/support/plain.py``) — the way a local model server is often written,
whose own CPU per request competes with the client's on a shared machine.

    python benchmarks/bench_providers.py [--episodes 512] [--latency 0.5]
        [--concurrency 8 64 128] [--apis responses chat messages] [--servers lean plain]
        [--rate-limit 16] [--baseline PYTHON --repeat 3]

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

With ``--baseline`` (the python of another checkout's environment, see ``benchmarks/ab.py``)
every row runs ``--repeat`` times under each checkout, alternated, each run a process of its
own, and the table gives each side's median efficiency and client CPU per call, the ratio
new/old of the efficiencies, and the load average before the runs.

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
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the endpoints

from ab import add_options
from support.paced import Pace, PacedServer

SPECS = {"responses": "openai/paced?base_url={url}/v1",
         "chat": "openai/paced?api=chat&base_url={url}/v1",
         "messages": "anthropic/paced?base_url={url}"}
SERVERS = ("lean", "plain")


def _serve(server: str, pace: Pace, conn: Any) -> None:
    if server == "plain":
        from support.plain import serve

        with serve(pace) as plain:
            conn.send(plain.port)
            conn.recv()  # until told to stop
        return

    async def main() -> None:
        lean = PacedServer(pace)
        await lean.start()
        conn.send(lean.port)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop
        await lean.stop()

    asyncio.run(main())


@contextlib.contextmanager
def endpoint(server: str, pace: Pace) -> Iterator[str]:
    """The paced endpoint ``server`` in a process of its own (its CPU is not the client's)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(server, pace, child), daemon=True)
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
    args = _parser().parse_args()
    logging.getLogger("limbo.providers").setLevel(logging.ERROR)  # a retry line per 429
    pace = Pace(latency_s=args.latency, max_in_flight=args.rate_limit)
    if args.row:
        server, api, c = args.row
        print(json.dumps(_measure(server, api, int(c), pace, args)))
        return
    print(f"{args.episodes} episodes x 2 model calls, {args.latency:g} s latency"
          + (f", endpoint cap {args.rate_limit} in flight (429 + Retry-After: 1 beyond)"
             if args.rate_limit else ""))
    if args.baseline:
        _side_by_side(args)
        return
    print("| server | API | --concurrency | run wall | ideal | efficiency | command wall "
          "(efficiency) | client CPU per call | 429s | peak in flight | model_error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for server in args.servers:
        for api in args.apis:
            for c in args.concurrency:
                _print_row(server, api, c, _measure(server, api, c, pace, args))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 128])
    parser.add_argument("--apis", nargs="+", default=list(SPECS), choices=list(SPECS))
    parser.add_argument("--servers", nargs="+", default=list(SERVERS), choices=SERVERS,
                        help="the endpoints to run against (default: both)")
    parser.add_argument("--rate-limit", type=int, help="the endpoint's requests in flight cap")
    parser.add_argument("--profile",
                        help="write a cProfile of each run to PREFIX-<server>-<api>-<c>.prof")
    parser.add_argument("--row", nargs=3, metavar=("SERVER", "API", "C"),
                        help=argparse.SUPPRESS)  # one run, printed as JSON (for --baseline)
    add_options(parser)
    return parser


def _measure(server: str, api: str, c: int, pace: Pace,
             args: argparse.Namespace) -> dict[str, Any]:
    """One run against a fresh endpoint."""
    calls = 2 * args.episodes
    with endpoint(server, pace) as url:
        profile = f"{args.profile}-{server}-{api}-{c}.prof" if args.profile else None
        m = run(SPECS[api].format(url=url), args.episodes, c, profile)
        seen = stats(url)
    ideal = calls * args.latency / min(c, args.rate_limit or c)
    if sum(m.ends.values()) != args.episodes or seen["answered"] != calls:
        print(f"  (unexpected: terminations {dict(m.ends)}, answered {seen['answered']})",
              file=sys.stderr)
    return {"run_s": m.run_s, "ideal_s": ideal, "efficiency": ideal / m.run_s,
            "command_s": m.command_s, "cpu_per_call_ms": 1000 * m.cpu_s / calls,
            "refused": seen["refused"], "peak": seen["peak_in_flight"],
            "model_error": m.ends.get("model_error", 0)}


def _print_row(server: str, api: str, c: int, m: dict[str, Any]) -> None:
    print(f"| {server} | {api} | {c} | {m['run_s']:.1f} s | {m['ideal_s']:.1f} s "
          f"| {100 * m['efficiency']:.0f} % | {m['command_s']:.1f} s "
          f"({100 * m['ideal_s'] / m['command_s']:.0f} %) | {m['cpu_per_call_ms']:.1f} ms "
          f"| {m['refused']} | {m['peak']} | {m['model_error']} |", flush=True)


def _side_by_side(args: argparse.Namespace) -> None:
    """Every row under this checkout and under ``--baseline``, ``--repeat`` times each,
    alternated (each run a process of its own): the medians and the ratio new/old."""
    pythons = {"new": sys.executable, "old": str(args.baseline)}
    print("| server | API | --concurrency | efficiency new | efficiency old | A/B new/old "
          "| client CPU per call new | old | load (1 min) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for server in args.servers:
        for api in args.apis:
            for c in args.concurrency:
                found: dict[str, list[dict[str, Any]]] = {"new": [], "old": []}
                loads = []
                for _ in range(args.repeat):
                    for side, python in pythons.items():
                        loads.append(os.getloadavg()[0])
                        found[side].append(_subprocess_row(python, server, api, c, args))
                eff = {s: statistics.median(r["efficiency"] for r in rows)
                       for s, rows in found.items()}
                cpu = {s: statistics.median(r["cpu_per_call_ms"] for r in rows)
                       for s, rows in found.items()}
                print(f"| {server} | {api} | {c} | {100 * eff['new']:.0f} % "
                      f"| {100 * eff['old']:.0f} % | {eff['new'] / eff['old']:.2f} "
                      f"| {cpu['new']:.1f} ms | {cpu['old']:.1f} ms "
                      f"| {min(loads):.1f}-{max(loads):.1f} |", flush=True)


def _subprocess_row(python: str, server: str, api: str, c: int,
                    args: argparse.Namespace) -> dict[str, Any]:
    """One row's run under ``python`` (this script, that checkout's ``limbo``)."""
    argv = [python, __file__, "--row", server, api, str(c), "--episodes", str(args.episodes),
            "--latency", str(args.latency)]
    if args.rate_limit:
        argv += ["--rate-limit", str(args.rate_limit)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python}: {done.stderr[-800:]}")
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


if __name__ == "__main__":
    main()
