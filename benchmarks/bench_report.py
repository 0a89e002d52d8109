"""The HTML report at the paper's scale: a run of at least 25,930 episodes.

    python benchmarks/bench_report.py [RUN_DIR] [--episodes 25930] [--loads 5]
    python benchmarks/bench_report.py RUN_DIR --baseline PYTHON [--repeat 5]

Without RUN_DIR it runs E1's first 25,930 reference-policy episodes into runs/bench-report
(once; later calls reuse them). Prints the build time, the site's size on disk (target: under
150 MB) and, in headless Debian chromium from file://, the overview's first render — first
contentful paint and load event, median of cold loads in fresh browser contexts (target: under
2 s) — then the episode browser's first full list, one filter change over every episode, and
an episode page's lanes. With ``--baseline`` (the python of another checkout's environment, see
``benchmarks/ab.py``) it instead runs ``limbo report RUN_DIR`` as a user does, under both
checkouts, alternated, and prints the A/B ratio of its wall and CPU time (target: at most 10 s
on a quiet 2-core machine for the paper run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ab import add_options, compare, fresh
from bench_grid import PAPER_EPISODES, cells_for

from limbo.analysis.report.site import build
from limbo.analysis.report.write import write_site
from limbo.run.context import RunContext
from limbo.run.runner import run_cells

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import browser

SIZE_LIMIT_MB = 150
RENDER_LIMIT_MS = 2000


def ensure_run(run_dir: Path, episodes: int) -> Path:
    if not run_dir.exists() or not any(run_dir.glob("episodes*.jsonl")):
        print(f"running E1's first {episodes} episodes into {run_dir} ...", flush=True)
        run_cells(cells_for("e1", episodes), RunContext(out=run_dir, workers=2),
                  {"bench": "report"})
    return run_dir


def disk(root: Path) -> tuple[int, int, int]:
    """(files, bytes, bytes allocated on disk)."""
    files = [p for p in root.rglob("*") if p.is_file()]
    return (len(files), sum(p.stat().st_size for p in files),
            sum(p.stat().st_blocks * 512 for p in files))


def timings(page, url: str) -> dict[str, float]:
    page.goto(url, wait_until="load")
    return page.evaluate("""() => {
        const nav = performance.getEntriesByType('navigation')[0];
        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
        return {fcp: fcp ? fcp.startTime : NaN, load: nav.loadEventEnd};
    }""")


def measure(site: Path, loads: int, episode_id: str) -> None:
    with browser.launch() as chromium:
        rows = []
        for _ in range(loads):
            context = chromium.new_context(offline=True)
            rows.append(timings(context.new_page(), (site / "index.html").as_uri()))
            context.close()
        fcp = statistics.median(r["fcp"] for r in rows)
        load = statistics.median(r["load"] for r in rows)
        verdict = "ok" if fcp < RENDER_LIMIT_MS and load < RENDER_LIMIT_MS else "OVER"
        print(f"overview first render: first contentful paint {fcp:.0f} ms, load event "
              f"{load:.0f} ms (median of {loads} cold loads; target < {RENDER_LIMIT_MS} ms: "
              f"{verdict})")
        context = chromium.new_context(offline=True)
        page = context.new_page()
        listed = timings(page, (site / "episodes.html").as_uri())
        shown = page.locator("#summary").inner_text()
        filtered = page.evaluate("""() => {
            const sel = document.getElementById('f-duplicate');
            const t0 = performance.now();
            sel.value = 'yes';
            sel.dispatchEvent(new Event('change'));
            return performance.now() - t0;
        }""")
        print(f"episode browser: first list at {listed['load']:.0f} ms ({shown}); one filter "
              f"change over every episode {filtered:.0f} ms")
        page.goto((site / "episode.html").as_uri() + "#" + episode_id)
        page.wait_for_selector("#lanes")
        lanes = page.evaluate("performance.now()")
        print(f"episode page: lanes drawn {lanes:.0f} ms after navigation")
        context.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", nargs="?", type=Path)
    parser.add_argument("--episodes", type=int, default=PAPER_EPISODES)
    parser.add_argument("--loads", type=int, default=5)
    add_options(parser)
    args = parser.parse_args()
    run_dir = args.run_dir or ensure_run(Path("runs/bench-report"), args.episodes)
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="limbo-bench-report-") as tmp:
            out = Path(tmp) / "report"
            compare("the report", ["report", str(run_dir), "--out", str(out)], args.baseline,
                    args.repeat, fresh(out))
        return
    with tempfile.TemporaryDirectory(prefix="limbo-bench-report-") as tmp:
        out = Path(tmp) / "report"
        start = time.perf_counter()
        site = build([run_dir])
        write_site(site, out)
        wall = time.perf_counter() - start
        files, size, allocated = disk(out)
        verdict = "ok" if allocated < SIZE_LIMIT_MB * 1e6 else "OVER"
        print(f"{site.episodes} episodes from {run_dir}: report built in {wall:.1f} s")
        print(f"site on disk: {allocated / 1e6:.1f} MB allocated ({size / 1e6:.1f} MB in "
              f"{files} files; target < {SIZE_LIMIT_MB} MB: {verdict})")
        why = browser.missing()
        if why:
            print(f"no browser timings: {why}")
            return
        episode_id = str(site.loaded.frame["episode_id"].iloc[-1]) if site.loaded else ""
        measure(out, args.loads, episode_id)


if __name__ == "__main__":
    main()
