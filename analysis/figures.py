"""The paper's figures 2–6 from the same data as the tables, as PNG and SVG.

Drawn with matplotlib's object API on the Agg canvas (no display, no global pyplot state) and
readable in greyscale: grey levels with the value printed and a colour bar (Figure 2), hatches
(3, 6), marker shapes and line styles (4, 5). A cell without data is drawn as missing ("n/a"),
never as 0. Each figure draws from its experiments' episodes only (:meth:`Data.experiment`) and
names the runs it was computed from in a footer. A figure whose data is absent is not drawn;
:func:`render_safely` says which grid produces it.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import transforms
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from limbo.analysis import paper
from limbo.analysis.behaviour import figure6
from limbo.analysis.data import Data, absent, ordered
from limbo.analysis.draw import GREYS, HATCHES, Drawn, footer, new_figure
from limbo.analysis.summary_figure import figure0
from limbo.analysis.tables.e1 import e1_with_batch_supplement
from limbo.analysis.tables.waits import FIXED, TAIL, wait_order
from limbo.base.beside import in_turns

MODE_COLUMNS = (("lost ack / 500 / partial", paper.RESOLVES),
                ("conn reset", paper.CONN_RESET), ("late commit", paper.LATE_COMMIT),
                ("redelivery", paper.REDELIVERY), ("not executed", paper.NOT_EXECUTED))
"""Figure 2's column groups: Table 3's columns, in its order; other modes follow."""
CLASS_ORDER = ("keyed", "idempotent", "no key, strong read", "no key, eventual read",
               "no key, no read")
PNG_METADATA: dict[str, str | None] = {"Software": None}
SVG_METADATA: dict[str, str | None] = {"Date": None, "Creator": None}
"""No date or version stamp, and (with a fixed ``svg.hashsalt``) no random ids: the same logs
give byte-identical figure files."""
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p")
HEAT = ListedColormap(matplotlib.colormaps["Greys"](np.linspace(0.0, 0.8, 256)), "limbo-greys")
"""Figure 2's scale: white at 0 % to a dark grey at 100 % (never black, so a printed value
stays legible); the colour bar ends at 100 %."""


def _mode_columns(modes: set[str]) -> list[tuple[str, list[str]]]:
    """(group, its modes present) in Table 3's order, then the other modes."""
    found = [(name, [m for m in group if m in modes]) for name, group in MODE_COLUMNS]
    listed = {m for _, group in MODE_COLUMNS for m in group}
    found.append(("other", sorted(modes - listed)))
    return [(name, ms) for name, ms in found if ms]


def figure2(data: Data) -> Drawn:
    """Duplicate rate (%) by model and fault mode: E1, with E1s in the partial-batch column."""
    e1, batch = e1_with_batch_supplement(data)
    rows = pd.concat([e1[(e1["fault"] != "partial_batch").to_numpy()], batch])
    if rows.empty:
        return Drawn(2, None, absent("e1"))
    groups = _mode_columns(set(rows["fault"].astype(str)))
    modes = [m for _, ms in groups for m in ms]
    models = sorted(rows["model"].astype(str).unique())
    values = np.full((len(models), len(modes)), np.nan)
    for (model, mode), cell in rows.groupby(["model", "fault"], observed=True):
        values[models.index(model), modes.index(mode)] = 100 * data.rate(cell, "duplicate").rate
    fig, (ax,) = new_figure(2.2 + 0.75 * len(modes), 1.8 + 0.45 * len(models))
    shown = ax.imshow(np.ma.masked_invalid(values), cmap=HEAT, vmin=0, vmax=100,
                      aspect="auto")
    ax.set_facecolor("white")
    for (i, j), value in np.ndenumerate(values):
        text = "n/a" if np.isnan(value) else f"{value:.0f}"
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if value > 55 else "black")
    bar = fig.colorbar(shown, ax=ax, shrink=0.9, ticks=[0, 25, 50, 75, 100])
    bar.set_label("duplicate rate (%)", fontsize=8)
    ax.set_xticks(range(len(modes)), modes, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    start = 0
    for name, ms in groups:
        if start:
            ax.axvline(start - 0.5, color="black", linewidth=1.5)
        ax.text(start + (len(ms) - 1) / 2, -0.7, name, ha="center", va="bottom", fontsize=7,
                style="italic")
        start += len(ms)
    ax.set_title("Figure 2: duplicate rate (%) by model and fault mode (E1; partial batch "
                 "with E1s); columns as Table 3; n/a = no rated episode", fontsize=10, pad=18)
    footer(fig, data, "e1", "e1s")
    return Drawn(2, fig)


def _bars(ax: Axes, frame: pd.DataFrame, groups: list[str], series: list[str]) -> None:
    """Grouped bars with 95% intervals; ``frame`` has group, series, rate, lo, hi."""
    width = 0.8 / max(len(series), 1)
    for k, name in enumerate(series):
        part = frame[frame["series"] == name].set_index("group").reindex(groups)
        x = np.arange(len(groups)) + (k - (len(series) - 1) / 2) * width
        rate = 100 * part["rate"].to_numpy(float)
        err = whiskers(rate, 100 * part["lo"].to_numpy(float), 100 * part["hi"].to_numpy(float))
        there = ~np.isnan(rate)
        ax.bar(x[there], rate[there], width, yerr=err[:, there], capsize=2,
               color=GREYS[k % len(GREYS)], hatch=HATCHES[k % len(HATCHES)], edgecolor="black",
               linewidth=0.6, label=name, error_kw={"linewidth": 0.8})
        for xi in x[~there]:  # no episode: say so, never a bar of height 0
            ax.text(xi, 1, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(groups)), groups, fontsize=8)


def figure3(data: Data) -> Drawn:
    """Duplicate rate under committed faults by contract class and model (E1, E1s)."""
    e1, batch = e1_with_batch_supplement(data)
    others = [m for m in paper.COMMITTED if m not in paper.E1S_ONLY_IN]
    rows = pd.concat([e1[e1["fault"].isin(others).to_numpy()], batch])
    if rows.empty:
        return Drawn(3, None, absent("e1"))
    records = []
    for (klass, model), cell in rows.groupby(["contract_class", "model"], observed=True):
        rate, lo, hi = rate_point(data, cell, "duplicate")
        records.append({"group": klass, "series": model, "rate": rate, "lo": lo, "hi": hi})
    frame = pd.DataFrame(records)
    classes = ordered(frame["group"].unique(), CLASS_ORDER)
    fig, (ax,) = new_figure(max(8.0, 3 + 1.6 * len(classes)), 4.6)
    _bars(ax, frame, classes, sorted(frame["series"].unique()))
    ax.set_ylabel("duplicate rate (%)")
    ax.set_ylim(0, 105)
    fig.legend(fontsize=7, loc="outside right upper")
    ax.set_title("Figure 3: duplicates under committed faults by contract class (E1, E1s)\n"
                 f"{bars_say(data, wilson=True)}; n/a = no rated episode", fontsize=10)
    footer(fig, data, "e1", "e1s")
    return Drawn(3, fig)


CONDITION_MARKERS = {"vanilla": "v", "guard": ">", "state-oracle": "D", "outcome-oracle": "*"}


def rate_point(data: Data, cell: pd.DataFrame, outcome: str) -> tuple[float, float, float]:
    """A rate and its 95% interval: the cluster bootstrap's when one is drawn (the default of
    ``limbo figures``), else — and where the bootstrap has no width, a rate of 0% or 100% or
    worlds that all agree — the interval the tables print."""
    r = data.rate(cell, outcome)
    if data.uncertainty.replicates and r.boot_lo < r.boot_hi:
        return r.rate, r.boot_lo, r.boot_hi
    return r.rate, r.lo, r.hi


def mean_point(data: Data, cell: pd.DataFrame, column: str) -> tuple[float, float, float]:
    """A weighted mean (NaN values left out, as :meth:`Data.mean` does) and its 95%
    cluster-bootstrap interval (NaN without a bootstrap: a mean has no formula here)."""
    value = data.mean(cell, column)
    cell = cell[cell[column].notna().to_numpy()]
    boot = data.uncertainty.mean(cell[column].to_numpy(float), cell, data.weights(cell),
                                 f"mean:{column}")
    if boot is None:
        return value, np.nan, np.nan
    return value, float(boot.lo), float(boot.hi)


def bars_say(data: Data, wilson: bool = False) -> str:
    """What a figure's error bars are, for its title."""
    u = data.uncertainty
    if u.replicates:
        return (f"bars: 95% cluster bootstrap ({u.noun} resampled, B = {u.replicates}"
                + ("; the tables' interval where it has no width)" if wilson else ")"))
    if wilson:
        return f"bars: 95% clustered interval of the tables ({u.noun} as clusters)"
    return "no error bars (--bootstrap 0)"


def whiskers(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """matplotlib's 2 × n error extents below and above each value; none where unknown. A
    percentile interval need not hold its estimate (nor rounding keep a rate of 1 at or below
    an upper bound of 1): a whisker then starts at the point instead of running backwards."""
    found: np.ndarray = np.maximum(np.nan_to_num(np.vstack([values - low, high - values])), 0.0)
    return found


def _errorbars(ax: Axes, frame: pd.DataFrame, x: str, y: str) -> None:
    """Grey whiskers of each point's intervals (columns ``<x>_lo``… ; none where NaN)."""
    def spread(column: str) -> np.ndarray | None:
        values = frame[column].to_numpy(float)
        low, high = frame[f"{column}_lo"].to_numpy(float), frame[f"{column}_hi"].to_numpy(float)
        return None if np.isnan(low).all() else whiskers(values, low, high)

    ax.errorbar(frame[x].to_numpy(float), frame[y].to_numpy(float), xerr=spread(x),
                yerr=spread(y), fmt="none", ecolor="0.5", elinewidth=0.7, capsize=2, zorder=1)


def _wait_points(data: Data, rows: pd.DataFrame) -> pd.DataFrame:
    points = []
    for (contract, condition), cell in rows.groupby(["contract", "condition"], observed=True):
        time = [v / 60 for v in mean_point(data, cell, "agent_time_s")]
        eos = [100 * v for v in rate_point(data, cell, "exactly_once")]
        points.append((str(contract), str(condition), *time, *eos))
    return pd.DataFrame(points, columns=["contract", "condition", "time", "time_lo", "time_hi",
                                         "eos", "eos_lo", "eos_hi"])


def _wait_panel(data: Data, ax: Axes, rows: pd.DataFrame, title: str) -> None:
    """One line per contract through the wait conditions (labelled with Δ), and a marker per
    other condition: grey under the native contract, white with keys everywhere."""
    ax.set_title(title, fontsize=9)
    ax.set_ylim(-5, 105)
    if rows.empty:  # the axis still reads: a plain scale and why it is empty
        ax.set_xlabel("mean agent-visible time (sim. minutes)")
        ax.text(0.5, 0.5, "n/a: no rated E5 episode under this delay", ha="center",
                va="center", fontsize=8, transform=ax.transAxes)
        return
    frame = _wait_points(data, rows)
    _errorbars(ax, frame, "time", "eos")
    styles = {"native": ("o-", "0.3"), "keys-everywhere": ("s--", "white")}
    for contract, part in frame.groupby("contract"):
        part = part.set_index("condition")
        waits = [c for c in wait_order(set(part.index), data.waits()) if c.startswith("wait-")]
        style, fill = styles.get(contract, ("^:", "0.7"))
        if waits:
            ax.plot(part.loc[waits, "time"], part.loc[waits, "eos"], style, color="black",
                    markerfacecolor=fill, label=f"wait-Δ, {contract}")
        for condition, p in part.drop(index=waits).iterrows():
            ax.scatter(p["time"], p["eos"], marker=CONDITION_MARKERS.get(condition, "P"), s=60,
                       facecolor=fill, edgecolor="black", zorder=3,
                       label=f"{condition}, {contract}")
    _label_waits(ax, frame[frame["condition"].str.startswith("wait-").to_numpy()])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())  # 1, 10, 100: minutes, not powers of ten
    ax.set_xlabel("mean agent-visible time (sim. minutes, log scale)")


def _label_waits(ax: Axes, points: pd.DataFrame) -> None:
    """Label each wait condition's point with its Δ: for each Δ the higher line's label sits
    above its point and the lower's below, so the two contracts' labels never meet; where both
    points coincide (within 3 pp and 5% of the time) one label serves both."""
    for condition, same in points.groupby("condition", sort=False):
        same = same.sort_values("eos", ascending=False)
        top, low = same.iloc[0], same.iloc[-1]
        label = f"Δ={str(condition)[5:]} s"
        ax.annotate(label, (top["time"], top["eos"]), fontsize=6, xytext=(4, 6),
                    textcoords="offset points")
        apart = abs(top["eos"] - low["eos"]) > 3 or abs(np.log(top["time"] / low["time"])) > 0.05
        if len(same) > 1 and apart:
            ax.annotate(label, (low["time"], low["eos"]), fontsize=6, xytext=(4, -11),
                        textcoords="offset points")


def figure4(data: Data) -> Drawn:
    """EOS against mean agent time for the wait conditions, guard, oracles and keys (E5)."""
    matched = data.matched("e5", "waits")
    rows = matched.rows if matched is not None and matched.cells else data.frame.iloc[:0]
    rows = rows[rows["rated"].to_numpy()] if len(rows) else rows
    if rows.empty:
        return Drawn(4, None, absent("e5"))
    fig, axes = new_figure(11, 5.4, panels=2, sharey=True)
    for ax, (mode, title) in zip(axes, ((FIXED, "fixed 90 s delay"),
                                        (TAIL, "heavy-tailed delay")), strict=True):
        _wait_panel(data, ax, rows[rows["fault"] == mode], title)
    axes[0].set_ylabel("exactly-once success (%)")
    found = [ax.get_legend_handles_labels() for ax in axes]
    handles, labels = max(found, key=lambda hl: len(hl[1]))
    fig.legend(handles, labels, fontsize=7, loc="outside right upper")
    fig.suptitle(f"Figure 4: waiting versus keys under late commits (E5)\n{bars_say(data)}",
                 fontsize=10)
    footer(fig, data, "e5")
    return Drawn(4, fig)


SPREAD_PT = 7.0
"""How far apart (in points) the markers of conditions at one point are drawn, side by side."""


def _condition_panel(data: Data, ax: Axes, rows: pd.DataFrame, conditions: list[str]) -> None:
    """One model's conditions: a marker each at (mean tool calls, EOS) with whiskers and a ring
    of area ∝ duplicate rate. Conditions at the same point (the reference policies often
    behave alike under several prompts) are drawn side by side around it, never on top of
    each other; the ring and whiskers stay at the point."""
    points = []
    for k, condition in enumerate(conditions):
        cell = rows[(rows["condition"] == condition).to_numpy()]
        if not cell.empty:
            x, y = mean_point(data, cell, "tool_calls"), rate_point(data, cell, "exactly_once")
            points.append((k, condition, *x, *(100 * v for v in y),
                           data.rate(cell, "duplicate").rate))
    frame = pd.DataFrame(points, columns=["k", "condition", "x", "x_lo", "x_hi", "y", "y_lo",
                                          "y_hi", "dup"])
    _errorbars(ax, frame, "x", "y")
    # An outlined ring, not a filled disc: rings of nearby conditions never hide markers.
    ax.scatter(frame["x"], frame["y"], s=900 * frame["dup"], facecolor="none", edgecolor="0.55",
               linewidth=0.8, zorder=1)
    spot = frame[["x", "y"]].round(2).astype(str).agg("|".join, axis=1)
    for _, same in frame.groupby(spot.to_numpy(), sort=False):
        for i, p in enumerate(same.itertuples()):
            inches = (i - (len(same) - 1) / 2) * SPREAD_PT / 72
            shift = ax.transData + transforms.ScaledTranslation(inches, 0,
                                                                ax.figure.dpi_scale_trans)
            ax.scatter(p.x, p.y, s=28, marker=MARKERS[p.k % len(MARKERS)], facecolor="white",
                       edgecolor="black", linewidth=0.9, label=p.condition, zorder=3 + i,
                       transform=shift)


def figure5(data: Data) -> Drawn:
    """EOS against mean tool calls per condition, one panel per model (E2, native); the grey
    disc's area is proportional to the duplicate rate."""
    matched = data.matched("e2", "conditions")
    rows = matched.rows if matched is not None and matched.cells else data.frame.iloc[:0]
    if len(rows):
        rows = rows[rows["rated"].to_numpy() & (rows["fault"] != "none").to_numpy()]
    if rows.empty:
        return Drawn(5, None, absent("e2"))
    models = sorted(rows["model"].unique())
    conditions = ordered(rows["condition"].unique())
    columns = min(3, len(models))
    fig, axes = new_figure(3.8 * columns, 3.2 * -(-len(models) // columns) + 0.8, len(models),
                     columns, sharex=True, sharey=True)
    for ax, model in zip(axes, models, strict=True):
        _condition_panel(data, ax, rows[(rows["model"] == model).to_numpy()], conditions)
        ax.set_title(model, fontsize=8)
        ax.set_xlabel("mean tool calls per episode", fontsize=8)
        ax.set_ylabel("EOS (%)", fontsize=8)
    found: dict[str, Any] = {}
    for ax in axes:  # every condition once, whichever panel has it
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    fig.legend([found[c] for c in conditions if c in found],
               [c for c in conditions if c in found], fontsize=7, loc="outside right upper")
    fig.suptitle("Figure 5: EOS vs tool calls per condition (E2, native); grey ring area ∝ "
                 f"duplicate rate\n{bars_say(data)}", fontsize=10)
    footer(fig, data, "e2")
    return Drawn(5, fig)


FIGURES: dict[int, Callable[[Data], Drawn]] = {0: figure0, 2: figure2, 3: figure3, 4: figure4,
                                               5: figure5, 6: figure6}
"""Every figure by number: 0 draws the summary of whatever is loaded, the others the paper's."""


def render_safely(data: Data, out: Path) -> list[tuple[int, list[Path], str]]:
    """Draw every figure into ``out`` as PNG and SVG: (number, files written, why not drawn).

    A figure that fails says so ("could not be drawn: ...") and the others are still drawn.
    On two cores this process and a helper draw them in turns
    (:func:`~limbo.base.beside.in_turns`); this process writes every file."""
    out.mkdir(parents=True, exist_ok=True)
    done: list[tuple[int, list[Path], str]] = []
    numbers = list(FIGURES)
    for number, (files, why) in zip(numbers, in_turns(numbers, lambda n: render(data, n)),
                                    strict=True):
        for name, content in files.items():
            (out / name).write_bytes(content)
        done.append((number, [out / name for name in files], why))
    return done


def render(data: Data, number: int) -> tuple[dict[str, bytes], str]:
    """Figure ``number`` as PNG and SVG bytes by file name, and why it was not drawn (no files
    then). A figure that fails is not drawn, and says why ("could not be drawn: ...")."""
    try:
        drawn = FIGURES[number](data)
    except Exception as exc:  # noqa: BLE001 - one figure's failure must not stop the rest
        return {}, f"could not be drawn: {type(exc).__name__}: {exc}"
    if drawn.figure is None:
        return {}, drawn.absent
    return {f"figure{number}.{suffix}": content
            for suffix, content in saved(drawn.figure).items()}, drawn.absent


def saved(figure: Figure) -> dict[str, bytes]:
    """``figure`` as PNG and SVG bytes, by suffix.

    The SVG keeps the layout the PNG was saved with instead of running the layout engine again
    on the SVG's own text metrics, which is a third of what saving the SVG costs. The two sets
    of metrics differ by fractions of a point, and the layout's padding absorbs that. A vector
    file has no pixel grid for its layout to fit, so the PNG's layout is the one to compute."""
    files = {}
    for suffix, stamp in (("png", PNG_METADATA), ("svg", SVG_METADATA)):
        buffer = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "limbo"}):
            figure.savefig(buffer, format=suffix, metadata=stamp)
        files[suffix] = buffer.getvalue()
        figure.set_layout_engine("none")
    return files
