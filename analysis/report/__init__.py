"""The run report: a static HTML site over one or more runs (``limbo report``), also served live
(``limbo view``).

It reads logs only, through :func:`limbo.analysis.loader.load`, and shows the same tables and
figures as ``limbo tables`` and ``limbo figures``. Layout of a written report::

    index.html       overview: manifests, counts per status, errors, tables, figures
    episodes.html    the episode browser (filters, search, sort) over data/index.js
    episode.html     one episode (#<id>): two lanes on the sim-time axis, ledger, intents, report
    data/            meta.js, index.js (one compact row per episode), cells.js (table links)
    episodes/        bNNNN.js: episode details, a bucket per file, loaded on demand
    figures/         figureN.png / .svg
    assets/          style.css and the page scripts (written here, no library)

Everything opens from ``file://`` with no server and no network: data files are scripts
(Chromium will not ``fetch`` a file URL), and nothing outside the folder is referenced.
"""
