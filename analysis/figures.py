"""The paper's figures 2–6 from the same data as the tables, as PNG and SVG.

Drawn with matplotlib's object API on the Agg canvas (no display, no global pyplot state) and
readable in greyscale: grey levels with the value printed (Figure 2), hatches (3, 6), marker
shapes and line styles (4, 5). A figure whose data is absent is not drawn; :func:`render_safely`
says which grid produces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from limbo.analysis.data import E1, E2, E5, Data, committed_modes, ordered
from limbo.analysis.loader import modes_of
from limbo.analysis.recovery import BEHAVIOURS
from limbo.analysis.tables.waits import FIXED, TAIL, wait_order

MODE_ORDER = ("timeout_pre", "timeout_post", "timeout_late", "timeout_late_tail",
              "stale_readback", "http500_pre", "http500_post", "partial_batch",
              "conn_reset_post", "throttle_pre", "none", "redelivery", "phantom_success")
GROUP_ORDER = ("timeout", "server_error", "-", "success")
CLASS_ORDER = ("keyed", "idempotent", "no key, strong read", "no key, eventual read",
               "no key, no read")
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++")
GREYS = ("0.15", "0.45", "0.7", "0.9", "1.0", "0.3", "0.6", "0.8")
PNG_METADATA: dict[str, str | None] = {"Software": None}
SVG_METADATA: dict[str, str | None] = {"Date": None, "Creator": None}
"""No date or version stamp, and (with a fixed ``svg.hashsalt``) no random ids: the same logs
give byte-identical figure files."""
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">", "p")


@dataclass
class Drawn:
    """A figure, or why it could not be drawn."""

    number: int
    figure: Figure | None
    absent: str = ""


def _new(width: float, height: float, panels: int = 1, columns: int | None = None,
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


def _mode_columns(modes: set[str], groups: dict[str, str]) -> list[str]:
    def key(mode: str) -> tuple[int, int, str]:
        group = groups.get(mode, "-")
        rank = GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)
        return rank, MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode

    return sorted(modes, key=key)


def figure2(data: Data) -> Drawn:
    """Duplicate rate (%) by model and fault mode, E1 (with E1s when loaded)."""
    rows = E1.of(data.rated)
    if rows.empty:
        return Drawn(2, None, E1.absent())
    groups = dict(zip(rows["fault"], rows["group"], strict=False))
    modes, models = _mode_columns(set(rows["fault"]), groups), sorted(rows["model"].unique())
    values = np.full((len(models), len(modes)), np.nan)
    for (model, mode), cell in rows.groupby(["model", "fault"], observed=True):
        values[models.index(model), modes.index(mode)] = 100 * data.rate(cell, "duplicate").rate
    fig, (ax,) = _new(1.2 + 0.75 * len(modes), 1.4 + 0.45 * len(models))
    ax.imshow(np.nan_to_num(values, nan=0.0), cmap="Greys", vmin=0, vmax=140, aspect="auto")
    for (i, j), value in np.ndenumerate(values):
        text = "—" if np.isnan(value) else f"{value:.0f}"
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if value > 80 else "black")
    ax.set_xticks(range(len(modes)), modes, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    starts = [j for j in range(len(modes)) if j == 0 or groups.get(modes[j]) !=
              groups.get(modes[j - 1])]
    for j, end in zip(starts, [*starts[1:], len(modes)], strict=True):
        if j:
            ax.axvline(j - 0.5, color="black", linewidth=1.5)
        group = str(groups.get(modes[j], "-"))
        name = {"-": "no equivalent", "server_error": "server error"}.get(group, group)
        ax.text((j + end - 1) / 2, -0.7, name, ha="center", va="bottom", fontsize=8,
                style="italic")
    ax.set_title("Figure 2: duplicate rate (%) by model and fault mode (E1); columns grouped "
                 "by what the agent observes", fontsize=10, pad=18)
    return Drawn(2, fig)


def _bars(ax: Axes, frame: pd.DataFrame, groups: list[str], series: list[str]) -> None:
    """Grouped bars with 95% intervals; ``frame`` has group, series, rate, lo, hi."""
    width = 0.8 / max(len(series), 1)
    for k, name in enumerate(series):
        part = frame[frame["series"] == name].set_index("group").reindex(groups)
        x = np.arange(len(groups)) + (k - (len(series) - 1) / 2) * width
        rate = 100 * part["rate"].to_numpy(float)
        err = np.vstack([rate - 100 * part["lo"].to_numpy(float),
                         100 * part["hi"].to_numpy(float) - rate])
        ax.bar(x, np.nan_to_num(rate), width, yerr=np.nan_to_num(err), capsize=2,
               color=GREYS[k % len(GREYS)], hatch=HATCHES[k % len(HATCHES)], edgecolor="black",
               linewidth=0.6, label=name, error_kw={"linewidth": 0.8})
    ax.set_xticks(range(len(groups)), groups, fontsize=8)


def figure3(data: Data) -> Drawn:
    """Duplicate rate under committed faults by contract class and model (E1, E1s)."""
    rows = E1.of(data.rated)
    rows = rows[rows["fault"].isin(committed_modes())]
    if rows.empty:
        return Drawn(3, None, E1.absent())
    records = []
    for (klass, model), cell in rows.groupby(["contract_class", "model"], observed=True):
        r = data.rate(cell, "duplicate")
        records.append({"group": klass, "series": model, "rate": r.rate, "lo": r.lo,
                        "hi": r.hi})
    frame = pd.DataFrame(records)
    classes = ordered(frame["group"].unique(), CLASS_ORDER)
    fig, (ax,) = _new(2 + 1.6 * len(classes), 4.2)
    _bars(ax, frame, classes, sorted(frame["series"].unique()))
    ax.set_ylabel("duplicate rate (%)")
    ax.set_ylim(0, 105)
    fig.legend(fontsize=7, ncols=min(5, len(frame["series"].unique())), loc="outside lower center")
    ax.set_title("Figure 3: duplicates under committed faults by contract class (E1)",
                 fontsize=10)
    return Drawn(3, fig)


CONDITION_MARKERS = {"vanilla": "v", "guard": ">", "state-oracle": "D", "outcome-oracle": "*"}


def _wait_points(data: Data, rows: pd.DataFrame) -> pd.DataFrame:
    points = []
    for (contract, condition), cell in rows.groupby(["contract", "condition"], observed=True):
        points.append((str(contract), str(condition), data.mean(cell, "agent_time_s") / 60,
                       100 * data.rate(cell, "exactly_once").rate))
    return pd.DataFrame(points, columns=["contract", "condition", "time", "eos"])


def _wait_panel(data: Data, ax: Axes, rows: pd.DataFrame, title: str) -> None:
    """One line per contract through the wait conditions (labelled with Δ), and a marker per
    other condition: grey under the native contract, white with keys everywhere."""
    frame = _wait_points(data, rows)
    styles = {"native": ("o-", "0.3"), "keys-everywhere": ("s--", "white")}
    for contract, part in frame.groupby("contract"):
        part = part.set_index("condition")
        waits = [c for c in wait_order(set(part.index)) if c.startswith("wait-")]
        style, fill = styles.get(contract, ("^:", "0.7"))
        if waits:
            ax.plot(part.loc[waits, "time"], part.loc[waits, "eos"], style, color="black",
                    markerfacecolor=fill, label=f"wait-Δ, {contract}")
            for c in waits:
                ax.annotate(f"{c[5:]} s", (part.loc[c, "time"], part.loc[c, "eos"]),
                            fontsize=6, xytext=(4, -9), textcoords="offset points")
        for condition, p in part.drop(index=waits).iterrows():
            ax.scatter(p["time"], p["eos"], marker=CONDITION_MARKERS.get(condition, "P"), s=60,
                       facecolor=fill, edgecolor="black", zorder=3,
                       label=f"{condition}, {contract}")
    ax.set_xscale("log")
    ax.set_xlabel("mean agent time (sim minutes, log)")
    ax.set_title(title, fontsize=9)


def figure4(data: Data) -> Drawn:
    """EOS against mean agent time for the wait conditions, guard, oracles and keys (E5)."""
    rows = E5.of(data.rated)
    if rows.empty:
        return Drawn(4, None, E5.absent())
    fig, axes = _new(11, 5.2, panels=2, sharey=True)
    for ax, (mode, title) in zip(axes, ((FIXED, "fixed 90 s delay"),
                                        (TAIL, "heavy-tailed delay")), strict=True):
        _wait_panel(data, ax, rows[rows["fault"] == mode], title)
    axes[0].set_ylabel("exactly-once success (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncols=4, loc="outside lower center")
    fig.suptitle("Figure 4: waiting versus keys under late commits (E5)", fontsize=10)
    return Drawn(4, fig)


def figure5(data: Data) -> Drawn:
    """EOS against mean tool calls per condition, one panel per model (E2, native); the grey
    disc's area is proportional to the duplicate rate."""
    rows = E2.of(data.rated)
    rows = rows[(rows["contract"] == "native") & (rows["fault"] != "none")]
    if rows.empty:
        return Drawn(5, None, E2.absent())
    models = sorted(rows["model"].unique())
    conditions = ordered(rows["condition"].unique())
    columns = min(3, len(models))
    fig, axes = _new(3.8 * columns, 3.2 * -(-len(models) // columns) + 0.8, len(models),
                     columns, sharex=True, sharey=True)
    for ax, model in zip(axes, models, strict=True):
        for k, condition in enumerate(conditions):
            cell = rows[(rows["model"] == model) & (rows["condition"] == condition)]
            if cell.empty:
                continue
            x, y = data.mean(cell, "tool_calls"), 100 * data.rate(cell, "exactly_once").rate
            ax.scatter(x, y, s=900 * data.rate(cell, "duplicate").rate, facecolor="0.85",
                       edgecolor="0.5")
            ax.scatter(x, y, s=24, marker=MARKERS[k % len(MARKERS)], color="black",
                       label=condition)
        ax.set_title(model, fontsize=8)
        ax.set_xlabel("mean tool calls per episode", fontsize=8)
        ax.set_ylabel("EOS (%)", fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncols=5, loc="outside lower center")
    fig.suptitle("Figure 5: EOS vs tool calls per condition (E2, native); grey disc area ∝ "
                 "duplicate rate", fontsize=10)
    return Drawn(5, fig)


def _behaviour_panel(ax: Axes, frame: pd.DataFrame, models: list[str], title: str) -> None:
    left = np.zeros(len(models))
    for k, behaviour in enumerate(BEHAVIOURS):
        share = np.array([frame.get(behaviour, {}).get(m, 0.0) for m in models])
        ax.barh(range(len(models)), 100 * share, left=left, color=GREYS[k], hatch=HATCHES[k],
                edgecolor="black", linewidth=0.6, label=behaviour)
        left += 100 * share
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of episodes (%)")
    ax.set_title(title, fontsize=9)


def figure6(data: Data) -> Drawn:
    """What the agent did first after the focal timeout, by model: not-executed worlds
    against committed ones (observation-equivalent up to that moment)."""
    rows = E1.of(data.rated)
    rows = rows[rows["group"] == "timeout"]
    recovered = data.recoveries(rows)
    rows = rows[recovered.notna()].assign(behaviour=[r.first for r in recovered.dropna()])
    if rows.empty:
        return Drawn(6, None, E1.absent())
    not_run = rows["fault"].isin(modes_of(["not executed"]))
    models = sorted(rows["model"].unique())
    fig, axes = _new(11, 1.4 + 0.45 * len(models), panels=2)
    for ax, part, title in ((axes[0], rows[not_run], "not executed (timeout_pre)"),
                            (axes[1], rows[~not_run], "committed (timeout_post, late, stale)")):
        shares = part.groupby("model", observed=True)["behaviour"].value_counts(normalize=True)
        _behaviour_panel(ax, shares.unstack(fill_value=0.0).to_dict(), models, title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncols=len(BEHAVIOURS), loc="outside lower center")
    fig.suptitle("Figure 6: first action after the focal timeout, by model (E1)", fontsize=10)
    return Drawn(6, fig)


FIGURES: dict[int, Callable[[Data], Drawn]] = {2: figure2, 3: figure3, 4: figure4, 5: figure5,
                                               6: figure6}


def render_safely(data: Data, out: Path) -> list[tuple[int, list[Path], str]]:
    """Draw every figure into ``out`` as PNG and SVG: (number, files written, why not drawn).

    A figure that fails says so ("could not be drawn: ...") and the others are still drawn."""
    out.mkdir(parents=True, exist_ok=True)
    done: list[tuple[int, list[Path], str]] = []
    for number, draw in FIGURES.items():
        try:
            drawn = draw(data)
        except Exception as exc:  # noqa: BLE001 - one figure's failure must not stop the rest
            done.append((number, [], f"could not be drawn: {type(exc).__name__}: {exc}"))
            continue
        files = []
        if drawn.figure is not None:
            for suffix, stamp in (("png", PNG_METADATA), ("svg", SVG_METADATA)):
                path = out / f"figure{number}.{suffix}"
                with matplotlib.rc_context({"svg.hashsalt": "limbo"}):
                    drawn.figure.savefig(path, metadata=stamp)
                files.append(path)
        done.append((number, files, drawn.absent))
    return done
