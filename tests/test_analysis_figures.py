"""The figures say what they show: a missing cell is drawn as missing (never a 0), Figure 2 is
in Table 3's order with a colour bar, Figure 4 reads without one of its panels' data, Figure 6
runs the test its caption states, and every figure names the runs it came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from limbo.analysis.behaviour import permutation_test
from limbo.analysis.data import Data
from limbo.analysis.figures import FIGURES
from limbo.analysis.loader import load

LIMBO = str(Path(sys.executable).parent / "limbo")


def limbo(*args: str) -> None:
    done = subprocess.run([LIMBO, *args, "--quiet"], capture_output=True, text=True,
                          timeout=600, env={**os.environ})
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
    """Two E1 runs whose models ran different templates (so each lacks the other's write
    classes), and an E5 run with the fixed delay only."""
    root = tmp_path_factory.mktemp("figures")
    limbo("run", "e1", "--model", "policy/verify", "--template", "charge_invoice",
          "--out", str(root / "verify"))
    limbo("run", "e1", "--model", "policy/blind", "--template", "import_batch",
          "--out", str(root / "blind"))
    limbo("run", "e5", "--model", "policy/verify", "--template", "charge_invoice",
          "--fault", "timeout_late", "--out", str(root / "e5"))
    return Data(load([root / "verify", root / "blind", root / "e5"]))


def texts(figure) -> list[str]:
    return [t.get_text() for ax in figure.axes for t in ax.texts] + [
        t.get_text() for t in figure.texts]


def test_figure3_draws_a_missing_cell_as_missing(data: Data) -> None:
    drawn = FIGURES[3](data)
    (ax,) = [a for a in drawn.figure.axes if a.patches]
    heights = [p.get_height() for p in ax.patches]
    classes = len(ax.get_xticks())
    assert classes >= 2
    # two models, each with only its own template's classes: one bar per (class, model) that
    # has episodes, "n/a" for each that has none — never a bar of height 0 for no data
    assert len(heights) + texts(drawn.figure).count("n/a") == 2 * classes
    assert texts(drawn.figure).count("n/a") >= 1


def test_figure2_is_in_table3s_order_with_a_colour_bar(data: Data) -> None:
    drawn = FIGURES[2](data)
    heat, bar = drawn.figure.axes
    assert bar.get_ylabel() == "duplicate rate (%)"
    modes = [t.get_text() for t in heat.get_xticklabels()]
    assert modes[:3] == ["timeout_post", "http500_post", "partial_batch"]
    assert modes.index("conn_reset_post") < modes.index("timeout_late") < modes.index(
        "redelivery") < modes.index("timeout_pre")
    assert "n/a" in texts(drawn.figure)  # verify never ran partial_batch (not its template)


def test_figure4_reads_without_the_tail_panel_data(data: Data) -> None:
    drawn = FIGURES[4](data)
    fixed, tail = drawn.figure.axes
    assert fixed.get_xscale() == "log" and "log scale" in fixed.get_xlabel()
    assert tail.get_xscale() == "linear"
    assert any("n/a: no rated E5 episode" in t.get_text() for t in tail.texts)


def test_figure6_states_its_test_and_every_figure_its_runs(data: Data) -> None:
    drawn = FIGURES[6](data)
    assert any(t.startswith("p=") and "Holm" in t for t in texts(drawn.figure))
    for number in (2, 3, 4, 6):
        footer = FIGURES[number](data).figure.get_supxlabel()
        assert "Computed from: e1 " in footer or "Computed from: e5 " in footer
        assert "Reference policies" in footer


def test_the_permutation_test_separates_and_does_not_invent() -> None:
    panel = [0] * 30 + [1] * 30
    same = ["read back", "re-issue"] * 30
    apart = ["read back"] * 30 + ["re-issue"] * 30
    import numpy as np

    assert permutation_test(np.array(panel), np.array(same), seed=1) > 0.5
    assert permutation_test(np.array(panel), np.array(apart), seed=1) < 0.01
    assert permutation_test(np.array(panel), np.array(apart), seed=1) == permutation_test(
        np.array(panel), np.array(apart), seed=1)


def test_a_bootstrap_without_width_gives_way_to_the_tables_interval(data: Data) -> None:
    """A rate of 0% or 100%: every resampled set of worlds agrees, the bootstrap interval is a
    point, and the figure draws the tables' clustered interval instead; a rate whose worlds
    differ keeps its bootstrap interval."""
    from limbo.analysis.figures import rate_point
    from limbo.analysis.uncertainty import Uncertainty

    booted = Data(data.loaded, uncertainty=Uncertainty(replicates=200))
    frame = booted.rated
    verify = frame[(frame["model"] == "policy/verify") & (frame["fault"] == "timeout_post")]
    rate, lo, hi = rate_point(booted, verify, "duplicate")
    table = booted.rate(verify, "duplicate")
    assert rate == 0.0 and table.boot_lo == table.boot_hi == 0.0
    assert (lo, hi) == (table.lo, table.hi) and hi > 0.05
    mixed = frame[frame["model"] == "policy/verify"]
    rate, lo, hi = rate_point(booted, mixed, "duplicate")
    table = booted.rate(mixed, "duplicate")
    assert 0 < rate < 1 and (lo, hi) == (table.boot_lo, table.boot_hi) and lo < hi


def test_saving_without_the_disabled_drawing_pass_changes_no_byte(data: Data) -> None:
    """A figure lays itself out and stops on matplotlib's pass that draws nothing
    (:class:`~limbo.analysis.draw.LaidOut`), its empty axis labels not placed; every figure
    saved so is byte for byte the one a plain matplotlib figure, which walks every artist on
    that pass and places every label, saves (two figures whose layouts differ; the paper
    run's six figures were compared too)."""
    from matplotlib.figure import Figure

    from limbo.analysis.draw import LaidOut
    from limbo.analysis.figures import saved

    for number in (0, 2):  # four panels and a legend outside them; a colour bar
        ours, plain = (FIGURES[number](data).figure for _ in range(2))  # each saved once
        if ours is None:
            continue
        assert isinstance(ours, LaidOut) and isinstance(plain, LaidOut), number
        plain.__class__ = Figure  # the other one saved the plain way
        assert saved(ours) == saved(plain), number


def test_the_svg_is_laid_out_as_the_png_was(data: Data) -> None:
    """The SVG is saved with the layout the PNG was saved with (the layout engine runs once):
    every panel sits at the same fraction of the figure in both (to the SVG's rounding), where a
    layout of its own, on the SVG's text metrics, moves them by a hundredth of the figure."""
    import io
    import re

    from limbo.analysis.figures import saved

    def panels(svg: str) -> list[tuple[float, ...]]:
        """Each panel's background rectangle as fractions of the figure: left, top, right,
        bottom (SVG coordinates run down)."""
        width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
        found = []
        for d in re.findall(r'<g id="axes_\d+">\s*<g id="patch_\d+">\s*<path d="([^"]+)"', svg):
            points = [(float(x), float(y)) for x, y in re.findall(r"([\d.]+) ([\d.]+)", d)]
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            found.append((min(xs) / width, min(ys) / height, max(xs) / width, max(ys) / height))
        return found

    for number in (0, 3):  # a legend outside four panels; one panel
        figure = FIGURES[number](data).figure
        if figure is None:
            continue
        figure.savefig(io.BytesIO(), format="png")  # the PNG's layout
        laid = [(a.get_position().x0, 1 - a.get_position().y1, a.get_position().x1,
                 1 - a.get_position().y0) for a in figure.axes if a.get_visible()]
        svg = saved(figure)["svg"].decode()
        drawn = [edge for panel in panels(svg)[:len(laid)] for edge in panel]
        assert laid and drawn == pytest.approx([e for p in laid for e in p], abs=1e-4), number
