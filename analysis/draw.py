"""What every figure shares: the greyscale palette, the figure object, and the footer naming
the runs a figure was computed from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from limbo.analysis.data import Data

HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
GREYS = ("0.15", "0.45", "0.7", "0.9", "1.0", "0.3", "0.6", "0.8")


class LaidOut(Figure):
    """A figure whose drawing with every drawing call disabled only lays it out.

    Saving a figure that has a layout engine draws it twice (matplotlib's ``print_figure``):
    once with the renderer's drawing calls disabled, to run the layout, then for real, with
    the layout engine off. The first pass walks every artist for nothing anyone sees — on
    Figure 0, hundreds of rows of ticks on four axes, a third of what saving costs — so here
    it runs the layout and stops; the real pass draws every artist from that layout, and the
    files are the same byte for byte. A pass that draws anything is the plain figure's.

    On that pass, too, an axis label that says nothing is given a fixed place. matplotlib
    otherwise places it on every drawing by measuring every tick label of its axis, and an
    empty label is never drawn and never counted in a layout."""

    def draw(self, renderer: Any) -> None:
        if "draw_path" in vars(renderer) and self.axes and self.get_layout_engine() is not None:
            for axis in (axis for ax in self.axes for axis in (ax.xaxis, ax.yaxis)):
                if not axis.label.get_text():
                    axis.set_label_coords(0.5, 0.5)
            with self._render_lock:  # type: ignore[attr-defined]
                try:  # as Figure.draw does it
                    self.get_layout_engine().execute(self)  # type: ignore[union-attr]
                except ValueError:
                    pass
            return
        super().draw(renderer)


@dataclass
class Drawn:
    """A figure, or why it could not be drawn."""

    number: int
    figure: Figure | None
    absent: str = ""


def new_figure(width: float, height: float, panels: int = 1, columns: int | None = None,
               sharex: bool = False, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure on the Agg canvas with ``panels`` axes in rows of ``columns``."""
    fig = LaidOut(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    columns = columns or panels
    rows = -(-panels // columns)
    # Titles at a fixed height over their panels: matplotlib otherwise measures every tick
    # label of every panel on each drawing to lift a title clear of tick labels on top, which
    # no figure here draws (a twentieth of what saving the figures costs; the files are the
    # same byte for byte, and tests/test_analysis_figures_legible.py checks the clearance).
    with matplotlib.rc_context({"axes.titley": 1.0}):
        axes = list(fig.subplots(rows, columns, squeeze=False, sharex=sharex,
                                 sharey=sharey).flat)
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def footer(fig: Figure, data: Data, *experiments: str) -> None:
    """The runs the figure was computed from, and the reference-policy caveat when it applies,
    in small type under the figure."""
    from limbo.analysis.table import Table

    stamped = data.stamp(Table(0, "", []), *experiments)
    footer_lines(fig, stamped.sources, bool(stamped.caveat))


def footer_lines(fig: Figure, sources: list[str], policies: bool) -> None:
    """``sources`` (one line per run) and, when ``policies``, the reference-policy caveat, in
    small type under the figure."""
    from limbo.analysis.data import REFERENCE_CAVEAT

    lines = [f"Computed from: {s}" for s in sources]
    lines += [REFERENCE_CAVEAT] if policies else []
    # Legends sit to the right of the axes, so the layout engine stacks this under the axes
    # without it meeting a legend.
    fig.supxlabel("\n".join(lines), fontsize=5, color="0.3", ha="left", x=0.01)
