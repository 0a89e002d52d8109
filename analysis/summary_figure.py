"""Figure 0: the summary (Table 0) drawn — every loaded run has a figure.

One panel per rate (duplicates, task success, exactly-once, overclaim), one line per arm ×
contract × world, a marker per fault family (shape and grey level, never colour alone) at the
rate, with the table's 95% interval as a whisker: the design-effect Wilson interval on the
effective n, the same numbers Table 0 prints (a bootstrap per row would cost minutes on a large
grid and say nothing the table does not).
"""

from __future__ import annotations

import numpy as np

from limbo.analysis.data import Data
from limbo.analysis.draw import GREYS, Drawn, footer_lines, new_figure
from limbo.analysis.tables.summary import METRICS, Row, summary_rows

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
ROW_INCHES = 0.24
"""Height of one arm × contract × world line."""


def _line(row: Row, varies: tuple[bool, bool]) -> str:
    """The y label of a row: its arm, and its contract and world where the loaded runs have
    more than one."""
    parts = [row.arm]
    parts += [row.key[3]] if varies[0] else []
    parts += [row.key[4]] if varies[1] else []
    return " | ".join(parts)


def figure0(data: Data) -> Drawn:
    """The summary: dup, TS, EOS and overclaim by arm, contract, world and fault family."""
    rows = [r for r in summary_rows(data) if r.rates[0].n]
    if not rows:
        return Drawn(0, None, "no rated episode in the loaded runs (every one errored or never "
                              "reached its fault), so there is no rate to draw")
    varies = (len({r.key[3] for r in rows}) > 1, len({r.key[4] for r in rows}) > 1)
    lines = list(dict.fromkeys(_line(r, varies) for r in rows))
    families = list(dict.fromkeys(r.key[5] for r in rows))
    fig, axes = new_figure(3.2 * len(METRICS) + 2.5, 1.6 + ROW_INCHES * len(lines),
                           panels=len(METRICS))
    step = 0.7 / max(len(families), 1)
    for ax, (name, _) in zip(axes, METRICS.items(), strict=True):
        m = list(METRICS).index(name)
        for k, family in enumerate(families):
            mine = [r for r in rows if r.key[5] == family]
            y = np.array([lines.index(_line(r, varies)) for r in mine]) + (k - (len(families)
                                                                                 - 1) / 2) * step
            rate = np.array([100 * r.rates[m].rate for r in mine])
            low = np.array([100 * r.rates[m].lo for r in mine])
            high = np.array([100 * r.rates[m].hi for r in mine])
            ax.errorbar(rate, y, xerr=np.maximum(np.vstack([rate - low, high - rate]), 0),
                        fmt=MARKERS[k % len(MARKERS)], markersize=4, color="black",
                        markerfacecolor=GREYS[k % len(GREYS)], ecolor="0.6", elinewidth=0.7,
                        capsize=1.5, label=family)
        ax.set_xlim(-3, 103)
        ax.set_title(f"{name} (%)", fontsize=9)
        ax.grid(axis="x", color="0.9", linewidth=0.6)
        # The panels' y axes are not shared: a shared one gives every panel a tick per line,
        # drawn and measured for nothing (a quarter of the figure's CPU on the paper run).
        ax.set_ylim(len(lines) - 0.5, -0.5)
        ax.set_yticks([])
    axes[0].set_yticks(range(len(lines)), lines, fontsize=7)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="fault family", fontsize=7, title_fontsize=7,
               loc="outside right upper")
    fig.suptitle("Figure 0: summary of every loaded run (Table 0) — rates over rated episodes "
                 "by arm and fault family\nbars: 95% Wilson on the effective n "
                 f"({data.uncertainty.noun} as clusters), as Table 0 prints", fontsize=10)
    footer_lines(fig, data.describe_runs(np.ones(len(data.frame), dtype=bool)),
                 any(r.key[0].startswith("policy/") for r in rows))
    return Drawn(0, fig)
