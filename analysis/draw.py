"""What every figure shares: the greyscale palette, the figure object, and the footer naming
the runs a figure was computed from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from limbo.analysis.data import Data

HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
GREYS = ("0.15", "0.45", "0.7", "0.9", "1.0", "0.3", "0.6", "0.8")


@dataclass
class Drawn:
    """A figure, or why it could not be drawn."""

    number: int
    figure: Figure | None
    absent: str = ""


def new_figure(width: float, height: float, panels: int = 1, columns: int | None = None,
               sharex: bool = False, sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure on the Agg canvas with ``panels`` axes in rows of ``columns``."""
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    columns = columns or panels
    rows = -(-panels // columns)
    axes = list(fig.subplots(rows, columns, squeeze=False, sharex=sharex, sharey=sharey).flat)
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
