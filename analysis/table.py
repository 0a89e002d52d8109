"""A regenerated table: labelled rows of entries that carry the counts behind them, written
as Markdown, CSV or LaTeX.

An entry that has no data shows "—", never 0; an interval that cannot be had (one world, a
bootstrap whose replicates all agree) shows "[—]" and the table says why. Printed numbers
claim no more than the method has: the two ends of an interval are written to the same decimals,
and to more where fewer would make two different ends look alike; a Monte Carlo p at its floor
is a bound ("< 1e-05"); a model-based p below 1e-6 is "< 1e-6". In the CSV every entry is one
line with its unit (``%``, ``pp`` or empty), value, numerator, denominator (n), effective n,
interval, clusters and design effect (n / n_eff), and its cluster-bootstrap interval when one
was drawn — value, interval and bootstrap in the entry's unit, as shown — so a reader can redo
any cell; the table's caveat, notes (the n of each arm, what was left unmatched or excluded)
and provenance (the runs it was computed from) follow as lines of their own (rows ``caveat``,
``note`` and ``provenance``). Markdown and LaTeX carry the same lines.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limbo.analysis.stats import Rate

if TYPE_CHECKING:
    from limbo.analysis.bootstrap import Interval

EMPTY = "—"
CSV_FIELDS = ("table", "row", "column", "shown", "unit", "value", "numerator", "denominator",
              "n_eff", "lo", "hi", "clusters", "deff", "boot_lo", "boot_hi")
NUMBERS = CSV_FIELDS[5:]
"""The CSV's numeric columns, each an :class:`Entry` field of the same name."""
SCALED = ("value", "lo", "hi", "boot_lo", "boot_hi")
"""The numbers written in the entry's unit (a fraction × 100 for ``%`` and ``pp``)."""
UNITS = {"(%)": "%", "(pp)": "pp", "(min)": "min"}
"""A column name's closing unit, for entries that do not carry their own."""
MODEL_FLOOR = 1e-6
"""Below this a model-based p (Wald, t, χ² on 16–48 clusters) has no meaning: "< 1e-6"."""
GAPS = {"one cluster": "[—]: every episode of the cell is in one cluster (world): one world says "
                       "nothing of how worlds vary, so there is no interval",
        "no spread": "[—]: every bootstrap replicate gave the same value (the resampled worlds "
                     "all agree), so the bootstrap has no interval to give"}
"""Why an interval is shown as "[—]", said once in the table's notes."""


@dataclass(frozen=True)
class Behind:
    """Which episodes a rate was computed over (labels of the loaded frame's index) and which
    outcome column it counts, so a reader of the table can open exactly those episodes."""

    rows: Any
    outcome: str


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
    clusters: float = math.nan
    """The clusters (worlds, by default) the episodes behind the entry fall in."""
    deff: float = math.nan
    """The design effect n / n_eff (weighting × clustering)."""
    boot_lo: float = math.nan
    boot_hi: float = math.nan
    """The cluster-bootstrap interval, when one was drawn (``--bootstrap B``)."""
    behind: Behind | None = field(default=None, compare=False, repr=False)
    """The episodes the entry was computed over, where known (the HTML report links to them)."""
    unit: str = ""
    """``%`` or ``pp`` where value, interval and bootstrap are fractions shown × 100 (so the
    CSV writes them × 100, as shown); empty where they are as shown."""
    gap: str = field(default="", compare=False)
    """Why the interval is "[—]" (a key of :data:`GAPS`), or empty."""

    @property
    def empty(self) -> bool:
        return self.shown == EMPTY


def label(text: object) -> Entry:
    return Entry(str(text))


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def ends(lo: float, hi: float, digits: int, sign: str = "", between: str = ", ") -> str:
    """``[lo, hi]`` × 100 with ``digits`` decimals, more (up to 4) where fewer would print two
    different ends alike, and both ends always to the same decimals."""
    while True:
        shown = [f"{100 * v:{sign}.{digits}f}" for v in (lo, hi)]
        if shown[0] != shown[1] or lo == hi or digits >= 4:
            return f"[{shown[0]}{between}{shown[1]}]"
        digits += 1


def rate(r: Rate, counts: bool = True, boot: Interval | None = None) -> Entry:
    """A rate in percent with its 95% interval and raw counts: ``25.0 [13, 42] 10/40``; the
    clusters, design effect and bootstrap interval (``boot``, or the one it carries) go to the
    CSV. A cell of one cluster has no interval: ``20.0 [—] 1/5``."""
    behind = getattr(r, "behind", None)
    if r.n == 0 or math.isnan(r.rate):
        return Entry(EMPTY, numerator=r.successes, denominator=r.n, behind=behind, unit="%")
    gap = "one cluster" if math.isnan(r.lo) else ""
    shown = _pct(r.rate) + (" [—]" if gap else " " + ends(r.lo, r.hi, 0))
    if counts:
        shown += f" {r.successes}/{r.n}"
    entry = Entry(shown, r.rate, r.successes, r.n, r.n_eff, r.lo, r.hi,
                  float(getattr(r, "clusters", math.nan)), float(getattr(r, "deff", math.nan)),
                  getattr(r, "boot_lo", math.nan), getattr(r, "boot_hi", math.nan), behind,
                  "%", gap)
    if boot is None:
        return entry
    return dataclasses.replace(entry, boot_lo=float(boot.lo), boot_hi=float(boot.hi))


def number(value: float, n: int, digits: int = 1) -> Entry:
    """A mean (or other number) over ``n`` episodes."""
    if n == 0 or math.isnan(value):
        return Entry(EMPTY, denominator=n)
    return Entry(f"{value:.{digits}f}", value, denominator=n)


def count(n: int) -> Entry:
    return Entry(str(n), n, denominator=n)


def pvalue(p: float, bound: bool = False, model: bool = False) -> Entry:
    """A p-value: 2 significant digits, scientific below 0.001; ``bound``: Monte Carlo saw
    nothing as extreme and p is its floor, an upper bound (``< 1e-05``); ``model``: a Wald, t
    or χ² p, shown ``< 1e-6`` below :data:`MODEL_FLOOR`."""
    if math.isnan(p):
        return Entry(EMPTY)
    if bound:
        return Entry(f"< {p:.0e}", p)
    if model and p < MODEL_FLOOR:
        return Entry(f"< {MODEL_FLOOR:.0e}".replace("e-06", "e-6"), p)
    shown = "1" if p >= 0.9995 else (f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}")
    return Entry(shown, p)


def p_text(p: float, model: bool = True, bound: bool = False) -> str:
    """A p-value inside a sentence: ``p=0.0023``, ``p < 1e-6`` (model-based, below the floor),
    ``p < 2e-04`` (a Monte Carlo floor)."""
    shown = pvalue(p, bound=bound, model=model).shown
    return f"p {shown}" if shown.startswith("<") else f"p={shown}"


def odds(estimate: float, lo: float, hi: float) -> str:
    """An odds ratio and its interval, all three to the same decimals: two significant digits
    of the smaller end (``2.54 (0.95–6.60)``, ``4.5 (3.8–5.2)``, ``12 (3–48)``)."""
    smallest = min(abs(v) for v in (estimate, lo, hi) if v == v and v != 0) if any(
        v == v and v != 0 for v in (estimate, lo, hi)) else 1.0
    digits = min(4, max(0, 1 - math.floor(math.log10(smallest))))
    return f"{estimate:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def points(diff: float, n: int, interval: Interval | None = None) -> Entry:
    """A difference in percentage points, signed; with its cluster-bootstrap interval when one
    was drawn: ``+25.0 [+8.3, +41.7]`` (``[—]`` where every replicate gave the same value)."""
    if n == 0 or math.isnan(diff):
        return Entry(EMPTY, denominator=n, unit="pp")
    if interval is None:
        return Entry(f"{100 * diff:+.1f}", diff, denominator=n, unit="pp")
    lo, hi = float(interval.lo), float(interval.hi)
    gap = "no spread" if lo == hi else ""
    shown = f"{100 * diff:+.1f} " + ("[—]" if gap else ends(lo, hi, 1, "+"))
    return Entry(shown, diff, denominator=n, lo=lo, hi=hi, clusters=interval.clusters,
                 boot_lo=lo, boot_hi=hi, unit="pp", gap=gap)


def share(value: float, interval: Interval | None = None) -> Entry:
    """A share in percent (never "-0" from rounding noise), with its cluster-bootstrap interval
    when one was drawn: ``45 [30, 61]``."""
    if math.isnan(value):
        return Entry(EMPTY, unit="%")
    shown = f"{max(100 * value, 0.0):.0f}"
    if interval is None:
        return Entry(shown, value, unit="%")
    lo, hi = float(interval.lo), float(interval.hi)
    if math.isnan(lo):
        return Entry(f"{shown} [—]", value, clusters=interval.clusters, unit="%")
    gap = "no spread" if lo == hi else ""
    shown += " " + ("[—]" if gap else ends(max(lo, 0.0), max(hi, 0.0), 0))
    return Entry(shown, value, lo=lo, hi=hi, clusters=interval.clusters, boot_lo=lo, boot_hi=hi,
                 unit="%", gap=gap)


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
    caveat: str = ""
    """Said before the rows when they are scripted reference policies, not models."""
    sources: list[str] = field(default_factory=list)
    """The runs the table was computed from (grids, fingerprint, LIMBO and grader versions)."""
    left_out: list[str] = field(default_factory=list)
    """What of its grids' episodes the table leaves out and why (a world file, a contract
    the caption does not have), one line each; said even when the table has no data."""

    def absent_text(self) -> str:
        """Why the table is empty ("No data — produced by grid e2 …", or why it failed)."""
        return self.absent

    def provenance(self) -> list[str]:
        """The lines every format ends with: what the numbers came from."""
        from limbo import __version__
        from limbo.log.grading import GRADER_VERSION

        runs = self.sources or ["no run holds the episodes this table reads"]
        return [*(f"Computed from: {s}" for s in runs),
                f"Tabulated by LIMBO {__version__} (grader {GRADER_VERSION})."]

    def add(self, *entries: Entry) -> None:
        """A row; an entry whose interval is "[—]" brings the note that says why (once)."""
        assert len(entries) == len(self.header), (self.number, len(entries), self.header)
        self.rows.append(list(entries))
        for e in entries:
            if e.gap and GAPS[e.gap] not in self.notes:
                self.notes.append(GAPS[e.gap])

    def markdown(self) -> str:
        lines = [f"### Table {self.number}: {self.title}", ""]
        if self.caveat:
            lines += [f"> {self.caveat}", ""]
        tail = [f"- {line}" for line in [*self.left_out, *self.provenance()]]
        if self.absent:
            return "\n".join([*lines, self.absent_text(), "", *tail, ""])
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("| " + " | ".join("---:" if self._numeric(i) else "---"
                                       for i in range(len(self.header))) + " |")
        for row in self.rows:
            lines.append("| " + " | ".join(e.shown.replace("|", "\\|") for e in row) + " |")
        lines.append("")
        lines += [f"- {note}" for note in self.notes] + tail
        return "\n".join(lines) + "\n"

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
            writer.writerow([self.number, "", "", self.absent, "", *[""] * len(NUMBERS)])
        for line in [self.caveat] if self.caveat else []:
            writer.writerow([self.number, "caveat", "", line, "", *[""] * len(NUMBERS)])
        for row in self.rows:
            key = " / ".join(e.shown for e in row[:self.keys])
            for head, e in zip(self.header[self.keys:], row[self.keys:], strict=True):
                writer.writerow([self.number, key, head, e.shown, *_csv_numbers(e, head)])
        for kind, lines in (("note", self.notes), ("left out", self.left_out),
                            ("provenance", self.provenance())):
            for line in lines:
                writer.writerow([self.number, kind, "", line, "", *[""] * len(NUMBERS)])
        return out.getvalue()

    def latex(self) -> str:
        lines = [f"% Table {self.number}: {_tex(self.title)}"]
        lines += [f"% {_tex(self.caveat)}"] if self.caveat else []
        tail = [f"% {_tex(line)}" for line in [*self.left_out, *self.provenance()]]
        if self.absent:
            return "\n".join([*lines, f"% {_tex(self.absent)}", *tail, ""])
        lines.append("\\begin{tabular}{" + "l" * self.keys + "r" * (len(self.header) - self.keys)
                     + "}")
        lines += ["\\toprule", " & ".join(_tex(h) for h in self.header) + " \\\\", "\\midrule"]
        lines += [" & ".join(_tex(e.shown) for e in row) + " \\\\" for row in self.rows]
        lines += ["\\bottomrule", "\\end{tabular}"]
        lines += [f"% {_tex(note)}" for note in self.notes] + tail
        return "\n".join(lines) + "\n"


def _csv_numbers(entry: Entry, head: str) -> list[str]:
    """An entry's unit and numbers as the CSV writes them: value, interval and bootstrap in
    the unit shown (× 100 for a fraction shown in % or pp), the counts as they are; the unit is
    the entry's, else the one its column's name ends with."""
    unit = entry.unit or next((u for end, u in UNITS.items() if head.endswith(end)), "")
    scale = 100.0 if entry.unit else 1.0
    return [unit, *("" if math.isnan(v := float(getattr(entry, name))) else
                    repr(v * scale if name in SCALED else v) for name in NUMBERS)]


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "—": "---", "–": "--", "−": "$-$", "≤": r"$\leq$", "≥": r"$\geq$", "±": r"$\pm$",
        "δ": r"$\delta$", "Δ": r"$\Delta$", "²": r"$^2$", "†": r"$\dagger$", "χ": r"$\chi$",
        "₁": r"$_1$", "Σ": r"$\Sigma$"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)
