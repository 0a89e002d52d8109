"""The paper's tables as HTML, each entry linking to the episodes it was computed over.

An entry knows its episodes when it was computed by :meth:`Data.rate` (see
:class:`~limbo.analysis.table.Behind`): every rate in the tables. Labels, counts, p-values and
model-fit shares have no episode set of their own and are shown without a link.

A link is ``episodes.html#cell=T.R.C`` (table, row, column); ``data/cells.js`` holds each
cell's episode positions (rows of the index), delta-encoded, and is read only by the browser.
"""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np
import pandas as pd

from limbo.analysis.table import Entry, Table


def _positions(frame: pd.DataFrame, rows: Any) -> list[int]:
    found = frame.index.get_indexer(pd.Index(rows))
    return sorted(int(p) for p in found[found >= 0])


def _deltas(positions: list[int]) -> str:
    """Sorted positions as comma-separated gaps (small numbers: a cell of 5,000 episodes is a
    few kilobytes)."""
    if not positions:
        return ""
    gaps = np.diff(np.asarray(positions), prepend=0)
    return ",".join(map(str, gaps.tolist()))


def cell_id(table: Table, row: int, column: int) -> str:
    return f"{table.number}.{row}.{column}"


def cells_payload(tables: list[Table], frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Every linked entry of ``tables``: what it is, and its episodes."""
    out: dict[str, dict[str, Any]] = {}
    for table in tables:
        for r, row in enumerate(table.rows):
            key = " / ".join(e.shown for e in row[:table.keys])
            for c, entry in enumerate(row):
                if c < table.keys or entry.behind is None:
                    continue
                positions = _positions(frame, entry.behind.rows)
                if not positions:
                    continue
                out[cell_id(table, r, c)] = {
                    "table": table.number, "title": table.title, "row": key,
                    "column": table.header[c], "shown": entry.shown,
                    "outcome": entry.behind.outcome, "count": len(positions),
                    "rows": _deltas(positions)}
    return out


def _entry_html(table: Table, r: int, c: int, entry: Entry, linked: set[str]) -> str:
    text = escape(entry.shown)
    if c < table.keys:
        return f'<th scope="row">{text}</th>'
    ident = cell_id(table, r, c)
    if ident in linked:
        n = int(entry.denominator) if entry.denominator == entry.denominator else 0
        text = (f'<a href="episodes.html#cell={ident}" title="open the {n} episodes behind '
                f'this entry">{text}</a>')
    numeric = entry.value == entry.value or entry.denominator == entry.denominator
    return f'<td class="{"num" if numeric else "text"}">{text}</td>'


def table_html(table: Table, linked: set[str]) -> str:
    """One table as an HTML section (its notes, or why it has no data)."""
    title = f"Table {table.number}: {table.title}"
    parts = [f'<section class="ptable" id="table-{table.number}">',
             f"<h3>{escape(title)}</h3>"]
    if table.caveat:
        parts.append(f'<p class="caveat">{escape(table.caveat)}</p>')
    provenance = ('<ul class="provenance">' + "".join(f"<li>{escape(line)}</li>"
                                                      for line in [*table.left_out,
                                                                   *table.provenance()])
                  + "</ul>")
    if table.absent:
        parts.append(f'<p class="absent">{escape(table.absent_text())}</p>{provenance}</section>')
        return "\n".join(parts)
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in table.header)
    body = "\n".join(
        "<tr>" + "".join(_entry_html(table, r, c, e, linked) for c, e in enumerate(row)) + "</tr>"
        for r, row in enumerate(table.rows))
    parts.append(f'<div class="scroll" tabindex="0" role="region" aria-label="{escape(title)}">'
                 f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div>")
    if table.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in table.notes)
                     + "</ul>")
    parts += [provenance, "</section>"]
    return "\n".join(parts)
