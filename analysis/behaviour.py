"""Figure 6: what the agent did first after the focal timeout, by model — not-executed worlds
against committed ones — and the test its caption states.

The paper's caption: "The not-executed and committed panels are observation-equivalent; their
behaviour distributions are statistically indistinguishable for every model." Up to the
agent's first action the two kinds of world look the same, so a model's distribution of first
actions should not depend on which it is in. The test, per model, is a permutation test of
independence between panel and first action (the chi-square statistic of the 2 × k table,
its null distribution by shuffling the panel labels; :data:`PERMUTATIONS` draws, seeded per
model, so the same logs give the same p). It is exact in the limit and needs no large counts,
unlike the chi-square approximation. Each model's p is printed beside its bars, with Holm's
adjustment over the models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from limbo.analysis import paper
from limbo.analysis import table as t
from limbo.analysis.data import Data, absent
from limbo.analysis.draw import GREYS, HATCHES, Drawn, footer, new_figure
from limbo.analysis.paired import holm_bounds
from limbo.analysis.recovery import BEHAVIOURS
from limbo.base.rng import derive_seed

PERMUTATIONS = 4000


@dataclass(frozen=True)
class Indistinguishable:
    """The test of one model: p of independence between panel and first action."""

    model: str
    pvalue: float
    n_not_executed: int
    n_committed: int


def _chi2(table: np.ndarray) -> float:
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(expected > 0, (table - expected) ** 2 / expected, 0.0)
    return float(terms.sum())


def permutation_test(panel: np.ndarray, behaviour: np.ndarray, seed: int) -> float:
    """p of independence of two label arrays (Monte Carlo permutation of the chi-square
    statistic; (1 + hits) / (1 + draws), never 0)."""
    codes = pd.factorize(behaviour)[0]
    k = int(codes.max()) + 1 if len(codes) else 0
    if k < 2 or len(set(panel)) < 2:
        return 1.0

    def stat(labels: np.ndarray) -> float:  # the 2 × k counts (bincount: np.add.at is slow)
        return _chi2(np.bincount(labels.astype(int) * k + codes, minlength=2 * k)
                     .reshape(2, k).astype(float))

    observed = stat(panel)
    rng = np.random.default_rng(seed)
    hits = sum(stat(rng.permutation(panel)) >= observed - 1e-12 for _ in range(PERMUTATIONS))
    return (1 + hits) / (1 + PERMUTATIONS)


def first_actions(data: Data) -> pd.DataFrame:
    """E1's rated episodes whose focal write timed out, with their first action."""
    rows = data.experiment("e1")
    rows = rows[rows["rated"].to_numpy() & (rows["group"] == "timeout").to_numpy()]
    recovered = data.recoveries(rows)
    keep = recovered.notna().to_numpy()
    return rows[keep].assign(behaviour=[r.first for r in recovered[keep]])


def tests(rows: pd.DataFrame) -> list[Indistinguishable]:
    """The caption's test for each model with episodes in both panels."""
    found = []
    for model, part in rows.groupby("model", observed=True, sort=True):
        panel = part["fault"].isin(paper.NOT_EXECUTED).to_numpy()
        if panel.all() or not panel.any():
            continue
        p = permutation_test(panel.astype(int), part["behaviour"].to_numpy(),
                             derive_seed(0, f"figure6/{model}"))
        found.append(Indistinguishable(str(model), p, int(panel.sum()), int((~panel).sum())))
    return found


def _panel(ax: Axes, frame: dict[str, dict[str, float]], models: list[str], title: str) -> None:
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
    """The two panels, and each model's test of indistinguishability beside its bars."""
    rows = first_actions(data)
    if rows.empty:
        return Drawn(6, None, absent("e1"))
    not_run = rows["fault"].isin(paper.NOT_EXECUTED).to_numpy()
    models = sorted(rows["model"].astype(str).unique())
    fig, axes = new_figure(12, 1.6 + 0.45 * len(models), panels=2)
    for ax, part, kind in ((axes[0], rows[not_run], "not executed"),
                           (axes[1], rows[~not_run], "committed")):
        title = f"{kind}: {', '.join(sorted(set(part['fault'].astype(str))))} (n={len(part)})"
        shares = part.groupby("model", observed=True)["behaviour"].value_counts(normalize=True)
        _panel(ax, shares.unstack(fill_value=0.0).to_dict(), models, title)
    found = tests(rows)
    floors = [f.pvalue * (PERMUTATIONS + 1) < 1.5 for f in found]  # no shuffle as extreme
    adjusted, bounds = holm_bounds([f.pvalue for f in found], floors)
    for f, floor, p_holm, bound in zip(found, floors, adjusted, bounds, strict=True):
        axes[1].annotate(f"{t.p_text(f.pvalue, model=False, bound=floor)} (Holm "
                         f"{t.pvalue(float(p_holm), bound=bool(bound)).shown}; "
                         f"n={f.n_not_executed}+{f.n_committed})",
                         (101, models.index(f.model)), fontsize=6, va="center",
                         annotation_clip=False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside right upper")
    fig.suptitle("Figure 6: first action after the focal timeout, by model (E1); p: permutation "
                 "test that the two panels' distributions are the same", fontsize=10)
    footer(fig, data, "e1")
    return Drawn(6, fig)
