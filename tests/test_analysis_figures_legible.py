"""The figures stay legible where the reference policies make points coincide (issue 35):
Figure 2's colour bar ends at 100 %, Figure 4's Δ labels never overlap, Figure 5 draws
conditions at one point side by side, Figure 6's panels name their faults. Measured on the
drawn figure (text extents and marker positions in display pixels), not on the code."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection

from limbo.analysis.data import Data
from limbo.analysis.figures import FIGURES
from limbo.analysis.loader import load

LIMBO = str(Path(sys.executable).parent / "limbo")
ONE = ("--template", "charge_invoice")


def limbo(*args: str) -> None:
    done = subprocess.run([LIMBO, *args, "--quiet"], capture_output=True, text=True,
                          timeout=600, env={**os.environ})
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    root = tmp_path_factory.mktemp("legible")
    limbo("run", "e1", *ONE, "--out", str(root / "e1"))
    limbo("run", "e2", *ONE, "--model", "policy/blind", "--model", "policy/verify",
          "--out", str(root / "e2"))
    limbo("run", "e5", *ONE, "--model", "policy/verify", "--out", str(root / "e5"))
    return Data(load([root / "e1", root / "e2", root / "e5"]))


def test_figure2s_colour_bar_ends_at_100(data: Data) -> None:
    heat, bar = FIGURES[2](data).figure.axes
    (image,) = heat.get_images()
    assert image.norm.vmin == 0 and image.norm.vmax == 100
    assert bar.get_ylim() == (0.0, 100.0)


def test_figure4s_delta_labels_never_overlap(data: Data) -> None:
    figure = FIGURES[4](data).figure
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        labels = [t for t in ax.texts if t.get_text().startswith("Δ=")]
        assert labels, ax.get_title()
        boxes = [t.get_window_extent(renderer) for t in labels]
        for (a, ta), (b, tb) in itertools.combinations(zip(boxes, labels, strict=True), 2):
            assert not a.overlaps(b), (ax.get_title(), ta.get_text(), tb.get_text())


def test_figure5_draws_conditions_at_one_point_side_by_side(data: Data) -> None:
    figure = FIGURES[5](data).figure
    figure.canvas.draw()
    for ax in figure.axes[:2]:
        markers = [c for c in ax.collections
                   if isinstance(c, PathCollection) and c.get_sizes()[0] == 28]
        where = np.vstack([c.get_offset_transform().transform(c.get_offsets())
                           for c in markers])
        assert len(markers) == 9  # every condition of E2, once
        gaps = [np.hypot(*(p - q)) for p, q in itertools.combinations(where, 2)]
        assert min(gaps) >= 5, ax.get_title()  # pixels: no marker hides another


def test_figure6s_panels_name_their_faults(data: Data) -> None:
    figure = FIGURES[6](data).figure
    left, right = (ax.get_title() for ax in figure.axes[:2])
    assert left.startswith("not executed: timeout_pre")
    assert right.startswith("committed: ") and "timeout_post" in right
    assert "timeout_pre" not in right and "(n=" in left and "(n=" in right


def test_every_panels_title_clears_what_the_panel_draws(data: Data) -> None:
    """Titles sit at a fixed height over their panels (:func:`~limbo.analysis.draw.new_figure`
    spares matplotlib measuring every tick label to lift them): above every tick, tick label
    and axis label their panel draws, in each figure. A panel that put tick labels on top
    would fail here instead of hiding its title."""
    drawn = 0
    for number, make in FIGURES.items():
        figure = make(data).figure
        if figure is None:
            continue
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for ax in figure.axes:
            if not (ax.get_visible() and ax.get_title()):
                continue
            title = ax.title.get_window_extent(renderer)
            below = [ax.get_window_extent(renderer), ax.xaxis.get_tightbbox(renderer),
                     ax.yaxis.get_tightbbox(renderer)]
            assert all(title.y0 >= box.y1 - 0.5 for box in below if box is not None), (
                number, ax.get_title())
            drawn += 1
    assert drawn >= 6  # the panels of several figures were checked
