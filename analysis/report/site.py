"""The report site as a set of files in memory: built once from the runs, then either written to
disk (``limbo report``) or served (``limbo view``).

Episode details are not held by a site that is served: :meth:`Site.bucket` reads a bucket's
records through the loader when it is asked for, so a site over 25,000 episodes costs the
index, the tables and the figures in memory, not the logs. A site built to be written makes
them all at once, in forked workers (:mod:`~limbo.analysis.report.forked`), and holds them
compressed (about a sixth of the records' size).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis.data import Data
from limbo.analysis.loader import Loaded, collector_paused, load
from limbo.analysis.replicates import REPLICATES
from limbo.analysis.report import pages
from limbo.analysis.report.details import bucket_file, bucket_script, detail_json
from limbo.analysis.report.forked import Workers, forked
from limbo.analysis.report.index import bucket_count, buckets_of, index_payload
from limbo.analysis.report.linked import cells_payload
from limbo.analysis.report.overview import ErrorGroup, Figure, Overview, read_manifests
from limbo.analysis.runs import Fallback
from limbo.analysis.table import Table
from limbo.analysis.uncertainty import Uncertainty
from limbo.log.rerun import rerun_commands

LAST_DRAWN_FROM = 13
"""The last table whose selections a figure reuses (figures 2-6 are the paper's, as Tables 3-13;
figure 0 is Table 0)."""


@dataclass
class Site:
    """Every file of the report except the episode buckets, and the means to make those."""

    files: dict[str, bytes]
    loaded: Loaded | None
    buckets: int = 1
    version: int = 0
    episodes: int = 0
    _bucket_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _plan: _Buckets | None = field(default=None, repr=False)

    def bucket(self, number: int) -> bytes | None:
        """The script of bucket ``number`` (``None`` outside the range)."""
        if not 0 <= number < self.buckets:
            return None
        made = self.files.get(bucket_file(number))
        if made is not None:
            return made
        details: dict[str, str] = {}
        if self.loaded is not None:
            if self._plan is None:
                self._plan = _Buckets(self.loaded, self._bucket_rows, self.buckets)
            details = self._plan.details(number)
        return bucket_script(number, details)

    def all_files(self) -> dict[str, bytes]:
        """Every file, buckets included (built here: large for large runs)."""
        out = dict(self.files)
        for number in range(self.buckets):
            out[bucket_file(number)] = self.bucket(number) or b""
        return out


class _Buckets:
    """Which rows each bucket holds, in file order, and how to make their details: every
    episode's line read once by its offset, and the re-run command made from its run's
    manifests read once."""

    def __init__(self, loaded: Loaded, rows: np.ndarray, buckets: int) -> None:
        frame = loaded.frame
        self.loaded = loaded
        self.columns = [frame[c].to_numpy() for c in ("episode_id", "file", "line", "offset",
                                                       "length")]
        files, offsets = self.columns[1].astype(np.int64), self.columns[3].astype(np.int64)
        self.order = np.lexsort((offsets, files, rows))
        self.starts = np.searchsorted(rows[self.order], np.arange(buckets + 1))
        self.reruns: dict[int, Callable[[str], str]] = {}

    def details(self, number: int) -> dict[str, str]:
        out: dict[str, str] = {}
        ids, files, lines, offsets, lengths = self.columns
        for i in self.order[self.starts[number]:self.starts[number + 1]]:
            episode_id, file_no = str(ids[i]), int(files[i])
            text = self.loaded.line(file_no, int(offsets[i]), int(lengths[i]))
            out[episode_id] = detail_json(text, self.loaded.files[file_no], int(lines[i]),
                                          episode_id, self._rerun(file_no)(episode_id))
        return out

    def _rerun(self, file_no: int) -> Callable[[str], str]:
        if file_no not in self.reruns:
            self.reruns[file_no] = rerun_commands(self.loaded.files[file_no].parent)
        return self.reruns[file_no]


def _figures(pool: Workers) -> tuple[list[Figure], dict[str, bytes]]:
    from limbo.analysis.figures import FIGURES

    figures: list[Figure] = []
    files: dict[str, bytes] = {}
    for number in FIGURES:
        drawn, why = pool.figure(number)
        names = [f"figures/{name}" for name in drawn]
        files.update(zip(names, drawn.values(), strict=True))
        doc = (FIGURES[number].__doc__ or "").strip().split("\n\n")[0]
        figures.append(Figure(number, " ".join(doc.split()), names, why))
    return figures, files


def _errors(loaded: Loaded) -> list[ErrorGroup]:
    """Errored episodes (infra_error, model_error, timeout), grouped by their reason."""
    frame = loaded.frame
    rows = frame[frame["error"]]
    groups: dict[tuple[str, str], ErrorGroup] = {}
    for _, record in loaded.records(rows):
        outcome = record["outcome"]
        key = (str(outcome.get("termination")), str(outcome.get("termination_reason")))
        groups.setdefault(key, ErrorGroup(*key)).episodes.append(str(record.get("episode_id")))
    return sorted(groups.values(), key=lambda g: (-len(g.episodes), g.termination, g.reason))


def _common_files(meta: dict[str, Any]) -> dict[str, bytes]:
    files = {f"assets/{name}": pages.asset(name) for name in pages.STATIC}
    files["data/meta.js"] = pages.data_script("meta", meta)
    files["episodes.html"] = pages.page("episodes", "Episodes · LIMBO report",
                                        pages.BROWSER_BODY,
                                        ["data/index.js", "data/cells.js", "assets/browse.js"])
    files["episode.html"] = pages.page("episode", "Episode · LIMBO report", pages.EPISODE_BODY,
                                       ["assets/lanes.js", "assets/episode.js"])
    return files


def build(paths: Sequence[Path], weighting: str = "template", version: int = 0,
          fallback: Fallback | None = None, workers: int = 0) -> Site:
    """The site over the runs in ``paths``; :class:`UsageError` when nothing loads. With
    ``workers``, the figures and every episode bucket are made by that many forked processes
    (:mod:`~limbo.analysis.report.forked`) while this one builds the tables, and the site
    holds the buckets; without, buckets are made when asked for (:meth:`Site.bucket`)."""
    loaded = load(paths, fallback)
    frame = loaded.frame
    buckets = bucket_count(len(frame))
    rows = buckets_of([str(i) for i in frame["episode_id"]], buckets)
    site = Site({}, loaded, buckets, version, len(frame), rows)
    site._plan = _Buckets(loaded, rows, buckets)  # made before any worker is forked
    data = Data(loaded, weighting)
    # The figures as `limbo figures` draws them (its default bootstrap for the error bars).
    drawn = dataclasses.replace(data, uncertainty=Uncertainty(
        replicates=REPLICATES["figures"]))
    with forked(site, drawn, workers) as pool:
        for file_no in range(len(loaded.files)):  # opened once, shared by the workers
            loaded.line(file_no, 0, 0)
        with collector_paused():  # as `limbo tables` builds them
            tables, failures = _tables_and_figures(data, pool)
        site.files.update(_pages(paths, loaded, tables, failures, pool, version))
        if workers:
            site.files.update((bucket_file(n), script) for n, script in pool.buckets())
    return site


def _tables_and_figures(data: Data, pool: Workers) -> tuple[list[Table], list[str]]:
    """Every table, built here, and the figures handed to workers as soon as the tables they
    draw from are built: Figure 0 (the summary) after Table 0, the paper's figures after
    Tables 3-13; Tables 14-16, which no figure draws from, last."""
    from limbo.analysis.figures import FIGURES
    from limbo.analysis.tables import TABLES, build_safely

    tables: list[Table] = []
    failures: list[str] = []
    steps = [([n for n in TABLES if n == 0], [n for n in FIGURES if n == 0]),
             ([n for n in TABLES if 0 < n <= LAST_DRAWN_FROM], [n for n in FIGURES if n != 0]),
             ([n for n in TABLES if n > LAST_DRAWN_FROM], [])]
    for numbers, figures in steps:
        built, failed = build_safely(data, numbers)
        tables, failures = tables + built, failures + failed
        pool.draw(figures)
    return tables, failures


def _pages(paths: Sequence[Path], loaded: Loaded, tables: list[Table], failures: list[str],
           pool: Workers, version: int) -> dict[str, bytes]:
    """Every file but the buckets, the figures waited for last (the workers draw them
    while this process makes the rest)."""
    frame = loaded.frame
    cells = cells_payload(tables, frame)
    meta = {"version": version, "episodes": len(frame), "buckets": bucket_count(len(frame)),
            "sources": [str(p) for p in paths]}
    files = _common_files(meta)
    files["data/index.js"] = pages.data_script("index", index_payload(frame))
    files["data/cells.js"] = pages.data_script("cells", cells)
    manifests, problems, errors = read_manifests(paths), loaded.messages(), _errors(loaded)
    figures, drawn = _figures(pool)
    files.update(drawn)
    overview = Overview(sources=[str(p) for p in paths], manifests=manifests, frame=frame,
                        problems=problems, errors=errors, tables=tables, linked=set(cells),
                        figures=figures, table_failures=failures)
    files["index.html"] = pages.page("overview", "LIMBO run report", overview.html(), [])
    return files


def waiting(paths: Sequence[Path], reason: str, version: int = 0) -> Site:
    """The site of runs with no episode yet (``limbo view`` on a run that has just started)."""
    body = (f"<h1>LIMBO run report</h1><p>No episodes yet in {', '.join(map(str, paths))}: "
            f"{reason}</p><p>This page refreshes when episodes arrive.</p>")
    meta = {"version": version, "episodes": 0, "buckets": 1, "sources": [str(p) for p in paths]}
    files = _common_files(meta)
    files["index.html"] = pages.page("overview", "LIMBO run report", body, [])
    files["data/index.js"] = pages.data_script("index", index_payload(pd.DataFrame(
        {"episode_id": pd.Series([], dtype=object)})))
    files["data/cells.js"] = pages.data_script("cells", {})
    return Site(files, None, 1, version, 0)
