"""A regenerated table: labelled rows of entries that carry the counts behind them, written
as Markdown, CSV or LaTeX.

An entry that has no data shows "—", never 0. In the CSV every entry is one line with its
numerator, denominator, Kish effective n and interval, so a reader can redo any cell.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field

from limbo.analysis.stats import Rate

EMPTY = "—"
CSV_FIELDS = ("table", "row", "column", "shown", "value", "numerator", "denominator", "n_eff",
              "lo", "hi")


@dataclass(frozen=True)
class Entry:
    """One cell: what is shown, and the numbers behind it (NaN where they do not apply)."""

    shown: str
    value: float = math.nan
    numerator: float = math.nan
    denominator: float = math.nan
    n_eff: float = math.nan
    lo: float = math.nan
    hi: float = math.nan

    @property
    def empty(self) -> bool:
        return self.shown == EMPTY


def label(text: object) -> Entry:
    return Entry(str(text))


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def rate(r: Rate, counts: bool = True) -> Entry:
    """A rate in percent with its 95% interval and raw counts: ``25.0 [13, 42] 10/40``."""
    if r.n == 0 or math.isnan(r.rate):
        return Entry(EMPTY, numerator=r.successes, denominator=r.n)
    shown = f"{_pct(r.rate)} [{100 * r.lo:.0f}, {100 * r.hi:.0f}]"
    if counts:
        shown += f" {r.successes}/{r.n}"
    return Entry(shown, r.rate, r.successes, r.n, r.n_eff, r.lo, r.hi)


def number(value: float, n: int, digits: int = 1) -> Entry:
    """A mean (or other number) over ``n`` episodes."""
    if n == 0 or math.isnan(value):
        return Entry(EMPTY, denominator=n)
    return Entry(f"{value:.{digits}f}", value, denominator=n)


def count(n: int) -> Entry:
    return Entry(str(n), n, denominator=n)


def pvalue(p: float) -> Entry:
    """A p-value: 2 significant digits, scientific below 0.001."""
    if math.isnan(p):
        return Entry(EMPTY)
    shown = "1" if p >= 0.9995 else (f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}")
    return Entry(shown, p)


def points(diff: float, n: int) -> Entry:
    """A difference in percentage points, signed."""
    if n == 0 or math.isnan(diff):
        return Entry(EMPTY, denominator=n)
    return Entry(f"{100 * diff:+.1f}", diff, denominator=n)


@dataclass
class Table:
    """A paper table regenerated from logs. ``keys`` leading columns label the row."""

    number: int
    title: str
    header: list[str]
    keys: int = 1
    rows: list[list[Entry]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    absent: str = ""
    """Why there is nothing to show (which grid produces the data), instead of zeros."""

    def add(self, *entries: Entry) -> None:
        assert len(entries) == len(self.header), (self.number, len(entries), self.header)
        self.rows.append(list(entries))

    def markdown(self) -> str:
        lines = [f"### Table {self.number}: {self.title}", ""]
        if self.absent:
            return "\n".join([*lines, f"No data: {self.absent}", ""])
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("| " + " | ".join("---:" if self._numeric(i) else "---"
                                       for i in range(len(self.header))) + " |")
        for row in self.rows:
            lines.append("| " + " | ".join(e.shown.replace("|", "\\|") for e in row) + " |")
        lines.append("")
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + ("\n" if self.notes else "")

    def _numeric(self, column: int) -> bool:
        """Right-align a column that holds numbers (labels and verdicts stay left)."""
        return column >= self.keys and any(
            not (math.isnan(row[column].value) and math.isnan(row[column].denominator))
            for row in self.rows)

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_FIELDS)
        if self.absent:
            writer.writerow([self.number, "", "", f"no data: {self.absent}", *[""] * 6])
        for row in self.rows:
            key = " / ".join(e.shown for e in row[:self.keys])
            for head, e in zip(self.header[self.keys:], row[self.keys:], strict=True):
                writer.writerow([self.number, key, head, e.shown, *(_csv_number(v) for v in (
                    e.value, e.numerator, e.denominator, e.n_eff, e.lo, e.hi))])
        return out.getvalue()

    def latex(self) -> str:
        lines = [f"% Table {self.number}: {_tex(self.title)}"]
        if self.absent:
            return "\n".join([*lines, f"% no data: {_tex(self.absent)}", ""])
        lines.append("\\begin{tabular}{" + "l" * self.keys + "r" * (len(self.header) - self.keys)
                     + "}")
        lines += ["\\toprule", " & ".join(_tex(h) for h in self.header) + " \\\\", "\\midrule"]
        lines += [" & ".join(_tex(e.shown) for e in row) + " \\\\" for row in self.rows]
        lines += ["\\bottomrule", "\\end{tabular}"]
        lines += [f"% {_tex(note)}" for note in self.notes]
        return "\n".join(lines) + "\n"


def _csv_number(value: float) -> str:
    return "" if math.isnan(value) else repr(float(value))


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "—": "---", "–": "--", "−": "$-$", "≤": r"$\leq$", "≥": r"$\geq$", "±": r"$\pm$",
        "δ": r"$\delta$", "Δ": r"$\Delta$", "²": r"$^2$"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)
