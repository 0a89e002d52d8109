"""The HTML shells of the three pages and the data scripts they read.

Data reaches a page as a script that calls ``LIMBO.receive(kind, ...)`` (common.js): a page
opened from ``file://`` may load scripts from beside it but, in Chromium, may not ``fetch``
them, so every data file is a script.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from string import Template
from typing import Any

from limbo.analysis.report.details import to_json

STATIC = ("style.css", "common.js", "browse.js", "episode.js", "lanes.js")
"""The site's own assets (package data), copied to ``assets/``."""


def asset(name: str) -> bytes:
    return resources.files("limbo.analysis.report").joinpath("static", name).read_bytes()


def data_script(kind: str, payload: Any) -> bytes:
    return f'LIMBO.receive("{kind}",{to_json(payload)});\n'.encode()


_SHELL = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'self' data: blob:">
<title>$title</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/style.css">
</head>
<body data-page="$page">
<a class="skip" href="#main">Skip to content</a>
<header class="top"><nav aria-label="report">
<a href="index.html"$cur_overview>Overview</a>
<a href="episodes.html"$cur_episodes>Episodes</a>
</nav><p id="live" role="status" aria-live="polite"></p></header>
<main id="main" tabindex="-1">
$body
</main>
$scripts
</body>
</html>
""")


def page(name: str, title: str, body: str, scripts: list[str]) -> bytes:
    """One page: ``name`` is ``overview``, ``episodes`` or ``episode``."""
    tags = "\n".join(f'<script src="{escape(src)}"></script>' for src in
                     ["assets/common.js", "data/meta.js", *scripts])
    return _SHELL.substitute(
        title=escape(title), page=name, body=body, scripts=tags,
        cur_overview=' aria-current="page"' if name == "overview" else "",
        cur_episodes=' aria-current="page"' if name == "episodes" else "").encode()


BROWSER_BODY = """<h1>Episodes</h1>
<div id="cell-banner" hidden></div>
<form id="filters" class="filters" role="search" aria-label="filter episodes">
<div class="field"><label for="q">Episode id contains</label>
<input id="q" name="q" type="search" autocomplete="off" spellcheck="false"></div>
<div id="facets" class="facets"></div>
<div class="actions"><button type="button" id="clear">Clear filters</button></div>
</form>
<p id="summary" class="summary" aria-live="polite"></p>
<div class="scroll" tabindex="0" role="region" aria-label="episode list">
<table id="list" class="list"><thead></thead><tbody></tbody></table></div>
<nav id="pager" class="pager" aria-label="pages"></nav>
<noscript>The episode browser needs JavaScript; the overview and its tables do not.</noscript>
"""

EPISODE_BODY = """<div id="episode"><p id="loading">Loading the episode…</p></div>
<noscript>The episode page needs JavaScript.</noscript>
"""
