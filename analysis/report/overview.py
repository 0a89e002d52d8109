"""The overview page: first the summary of every loaded run (Table 0 and Figure 0), then what
was run (manifests), how the episodes ended (counts per status, errors with their reasons), what
the loader could not use, the paper's tables and figures 2–6.

It is plain HTML written here, so it renders before any script runs and never touches the
episode details.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from limbo.analysis.report.linked import table_html
from limbo.analysis.table import Table

SUMMARY = 0
"""The number of the summary table and figure: shown first, in a section of their own."""
MAX_ERROR_GROUPS = 50
"""Reasons listed on the overview; the rest are one link away (errors are often all alike)."""
MANIFEST_FIELDS = ("version", "git_commit", "git_dirty", "started_at", "resumed_at", "ended_at",
                   "status", "stop_reason", "cells", "already_done", "ran", "shard", "host",
                   "python")


@dataclass
class Figure:
    number: int
    title: str
    files: list[str]
    absent: str = ""


@dataclass
class ErrorGroup:
    termination: str
    reason: str
    episodes: list[str] = field(default_factory=list)


def read_manifests(paths: Iterable[Path]) -> list[tuple[Path, dict[str, Any] | str]]:
    """Each manifest beside the records: its contents, or why it could not be read."""
    out: list[tuple[Path, dict[str, Any] | str]] = []
    for given in paths:
        folder = given if given.is_dir() else given.parent
        for path in sorted(folder.glob("manifest*.json")):
            try:
                value = json.loads(path.read_text(encoding="utf-8"))
                out.append((path, value if isinstance(value, dict) else "not a JSON object"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                out.append((path, f"unreadable: {exc}"))
    return out


def _dl(items: Iterable[tuple[str, Any]]) -> str:
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(_text(v))}</dd>" for k, v in items
                   if v not in (None, "", [], {}))
    return f"<dl class='facts'>{rows}</dl>"


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _mapping(value: object) -> dict[str, Any]:
    """A manifest field that should be a table; anything else (a hand-edited file) is empty."""
    return value if isinstance(value, dict) else {}


def _manifest_html(path: Path, manifest: dict[str, Any] | str) -> str:
    head = f"<h3><code>{escape(str(path))}</code></h3>"
    if isinstance(manifest, str):
        return f"{head}<p class='warn'>{escape(manifest)}</p>"
    grid = _mapping(manifest.get("grid"))
    facts = [("grid", grid.get("name")), ("description", grid.get("description")),
             ("seed", grid.get("seed")), ("instances", grid.get("instances"))]
    facts += [(k, manifest.get(k)) for k in MANIFEST_FIELDS]
    argv = manifest.get("argv")
    if isinstance(argv, list):
        facts.append(("command", "limbo " + " ".join(map(str, argv))))
    levels, dropped = _mapping(manifest.get("levels")), _mapping(manifest.get("dropped"))
    return (head + _dl(facts) + "<details><summary>factor levels</summary>"
            + _dl(sorted(levels.items())) + "</details>" + _dropped_html(dropped))


def _dropped_html(dropped: dict[str, Any]) -> str:
    """The cells the grid's expansion left out, as a table: why, and how many."""
    if not dropped:
        return ""
    rows = "".join(f"<tr><th scope='row'>{escape(str(why))}</th><td class='num'>"
                   f"{escape(_text(n))}</td></tr>" for why, n in sorted(dropped.items()))
    return ("<table class='counts dropped'><caption>Cells left out when the grid was expanded"
            "</caption><thead><tr><th scope='col'>why</th><th scope='col'>cells</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")


def _browse(**filters: str) -> str:
    return "episodes.html#" + "&".join(f"{k}={quote(str(v), safe='')}" for k, v in filters.items())


def _counts_html(frame: pd.DataFrame) -> str:
    def table(title: str, column: str) -> str:
        counts = Counter(str(v) for v in frame[column])
        rows = "".join(f"<tr><th scope='row'><a href='{escape(_browse(**{column: k}))}'>"
                       f"{escape(k)}</a></th><td class='num'>{n}</td></tr>"
                       for k, n in sorted(counts.items()))
        return (f"<table class='counts'><caption>{escape(title)}</caption><thead><tr>"
                f"<th scope='col'>{escape(column)}</th><th scope='col'>episodes</th></tr>"
                f"</thead><tbody>{rows}</tbody></table>")

    fired = int(frame["fault_fired"].sum())
    return ("<div class='row'>" + table("How episodes ended", "termination")
            + table("Final report status", "report_status") + "</div>"
            + f"<p>{len(frame)} episodes; the fault fired in {fired}; "
              f"{int(frame['rated'].sum())} rated (fault fired, not errored: no infra_error, model_error or timeout). "
              f"<a href='episodes.html'>Browse all episodes</a>.</p>")


def _errors_html(groups: list[ErrorGroup]) -> str:
    if not groups:
        return "<p>No episode ended in infra_error, model_error or timeout.</p>"
    items = []
    for g in groups[:MAX_ERROR_GROUPS]:
        links = ", ".join(f"<a href='episode.html#{quote(e, safe='')}'>{escape(e)}</a>"
                          for e in g.episodes[:5])
        more = f" and {len(g.episodes) - 5} more" if len(g.episodes) > 5 else ""
        items.append(f"<li><strong>{escape(g.termination)}</strong> ×{len(g.episodes)}: "
                     f"<span class='reason'>{escape(g.reason)}</span><br>{links}{more}</li>")
    rest = groups[MAX_ERROR_GROUPS:]
    if rest:
        items.append(f"<li>and {sum(len(g.episodes) for g in rest)} more episodes with "
                     f"{len(rest)} other reasons: <a href='episodes.html#error=yes'>browse every "
                     f"error</a></li>")
    return "<ul class='errors'>" + "".join(items) + "</ul>"


def _figures_html(figures: list[Figure]) -> str:
    parts = []
    for f in figures:
        if not f.files:
            parts.append(f"<p class='absent'>Figure {f.number} not drawn: {escape(f.absent)}</p>")
            continue
        png = next((x for x in f.files if x.endswith(".png")), f.files[0])
        others = " ".join(f"<a href='{escape(x)}'>{escape(x.rsplit('.', 1)[-1].upper())}</a>"
                          for x in f.files)
        parts.append(f"<figure id='figure-{f.number}'><img src='{escape(png)}' alt='Figure "
                     f"{f.number}: {escape(f.title)}'><figcaption>Figure {f.number}: "
                     f"{escape(f.title)} ({others})</figcaption></figure>")
    return "\n".join(parts)


@dataclass
class Overview:
    """Everything the overview shows."""

    sources: list[str]
    manifests: list[tuple[Path, dict[str, Any] | str]]
    frame: pd.DataFrame
    problems: list[str]
    errors: list[ErrorGroup]
    tables: list[Table]
    linked: set[str]
    figures: list[Figure]
    table_failures: list[str] = field(default_factory=list)

    def html(self) -> str:
        summary = [t for t in self.tables if t.number == SUMMARY]
        tables = [t for t in self.tables if t.number != SUMMARY]
        contents = "".join(f"<li><a href='#table-{t.number}'>Table {t.number}</a></li>"
                           for t in tables)
        problems = "".join(f"<li>{escape(p)}</li>" for p in [*self.problems,
                                                              *self.table_failures])
        sections = [
            "<h1>LIMBO run report</h1>",
            f"<p class='sources'>From {escape(', '.join(self.sources))}</p>",
            f"<nav aria-label='tables'><ul class='inline'><li><a href='#summary'>Summary</a>"
            f"</li>{contents}<li><a href='#figures'>Figures</a></li></ul></nav>",
            "<section id='summary'><h2>Summary of every loaded run</h2><p>Every loaded episode, "
            "paper grid or not (the paper's tables below hold their captions' populations "
            "only). Each rate links to the episodes it was computed over.</p>"
            + "\n".join(table_html(t, self.linked) for t in summary)
            + _figures_html([f for f in self.figures if f.number == SUMMARY]) + "</section>",
            "<section id='runs'><h2>What was run</h2>"
            + ("".join(_manifest_html(p, m) for p, m in self.manifests)
               or "<p>No manifest.json beside the records.</p>") + "</section>",
            "<section id='status'><h2>Episodes</h2>" + _counts_html(self.frame) + "</section>",
            "<section id='errors'><h2>Errors</h2>" + _errors_html(self.errors) + "</section>",
        ]
        if problems:
            sections.append(f"<section id='problems'><h2>Input problems</h2><ul>{problems}</ul>"
                            "</section>")
        sections.append("<section id='tables'><h2>Tables</h2><p>Each rate links to the "
                        "episodes it was computed over.</p>"
                        + "\n".join(table_html(t, self.linked) for t in tables)
                        + "</section>")
        sections.append("<section id='figures'><h2>Figures</h2>"
                        + _figures_html([f for f in self.figures if f.number != SUMMARY])
                        + "</section>")
        return "\n".join(sections)
