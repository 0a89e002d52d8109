"""The report site as a set of files in memory: built once from the runs, then either written to
disk (``limbo report``) or served (``limbo view``).

Episode details are not held: :meth:`Site.bucket` reads a bucket's records through the loader
when it is written or asked for, so a site over 25,000 episodes costs the index, the tables
and the figures in memory, not the logs.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis.data import Data
from limbo.analysis.loader import Loaded, load
from limbo.analysis.replicates import REPLICATES
from limbo.analysis.report import pages
from limbo.analysis.report.details import bucket_file, bucket_script, detail_json
from limbo.analysis.report.index import bucket_count, bucket_of, index_payload
from limbo.analysis.report.linked import cells_payload
from limbo.analysis.report.overview import ErrorGroup, Figure, Overview, read_manifests
from limbo.analysis.runs import Fallback
from limbo.analysis.uncertainty import Uncertainty


@dataclass
class Site:
    """Every file of the report except the episode buckets, and the means to make those."""

    files: dict[str, bytes]
    loaded: Loaded | None
    buckets: int = 1
    version: int = 0
    episodes: int = 0
    _bucket_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def bucket(self, number: int) -> bytes | None:
        """The script of bucket ``number`` (``None`` outside the range)."""
        if not 0 <= number < self.buckets:
            return None
        details: dict[str, str] = {}
        if self.loaded is not None:
            rows = self.loaded.frame[self._bucket_rows == number]
            where = dict(zip(rows.index, zip(rows["episode_id"], rows["file"], rows["line"],
                                             strict=True), strict=True))
            for index, _, text in self.loaded.lines(rows):
                episode_id, file_no, line = where[index]
                details[str(episode_id)] = detail_json(
                    text, self.loaded.files[int(file_no)], int(line), str(episode_id))
        return bucket_script(number, details)

    def all_files(self) -> dict[str, bytes]:
        """Every file, buckets included (built here: large for large runs)."""
        out = dict(self.files)
        for number in range(self.buckets):
            out[bucket_file(number)] = self.bucket(number) or b""
        return out


def _figures(data: Data) -> tuple[list[Figure], dict[str, bytes]]:
    from limbo.analysis.figures import FIGURES, render_safely

    figures, files = [], {}
    with tempfile.TemporaryDirectory(prefix="limbo-figures-") as tmp:
        for number, written, why in render_safely(data, Path(tmp)):
            names = []
            for path in written:
                names.append(f"figures/{path.name}")
                files[names[-1]] = path.read_bytes()
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
          fallback: Fallback | None = None) -> Site:
    """The site over the runs in ``paths``; :class:`UsageError` when nothing loads."""
    from limbo.analysis.tables import TABLES, build_safely

    loaded = load(paths, fallback)
    data = Data(loaded, weighting)
    tables, failures = build_safely(data, list(TABLES))
    # The figures as `limbo figures` draws them (its default bootstrap for the error bars);
    # the cache of the episodes' selections is shared, none of it depends on the bootstrap.
    drawn = dataclasses.replace(data, uncertainty=Uncertainty(
        replicates=REPLICATES["figures"]))
    figures, files = _figures(drawn)
    frame = loaded.frame
    cells = cells_payload(tables, frame)
    overview = Overview(sources=[str(p) for p in paths], manifests=read_manifests(paths),
                        frame=frame, problems=loaded.messages(), errors=_errors(loaded),
                        tables=tables, linked=set(cells), figures=figures,
                        table_failures=failures)
    buckets = bucket_count(len(frame))
    meta = {"version": version, "episodes": len(frame), "buckets": buckets,
            "sources": [str(p) for p in paths]}
    files.update(_common_files(meta))
    files["index.html"] = pages.page("overview", "LIMBO run report", overview.html(), [])
    files["data/index.js"] = pages.data_script("index", index_payload(frame))
    files["data/cells.js"] = pages.data_script("cells", cells)
    rows = np.fromiter((bucket_of(str(i), buckets) for i in frame["episode_id"]),
                       dtype=np.int64, count=len(frame))
    return Site(files, loaded, buckets, version, len(frame), rows)


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
