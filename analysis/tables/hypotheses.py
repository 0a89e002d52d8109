"""Table 12: the preregistered hypotheses H1–H6, each with the paper's test, from the logs.

Populations: H1–H5 use experiment E1 (minimal harness, vanilla, native); H6 uses E3's
comparison ``guard`` (vanilla and guard on matched cells, native contract, each harness).
Clustered models cluster on the chosen unit (``--cluster``: the world by default). A verdict is
mechanical: ``supported``, ``not supported``, ``inconclusive`` or ``untested`` (no data).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from limbo.analysis import dist, paper
from limbo.analysis import table as t
from limbo.analysis.data import Data, absent
from limbo.analysis.gee import gee_clustered
from limbo.analysis.stats import OddsRatio, Rate, Shapley, firth_logit, glmm_agq, separation
from limbo.analysis.tables.e1 import COLUMNS, column_rows, shapley_blocks, shapley_for
from limbo.analysis.tables.harnesses import HARNESS_ORDER, guard_arms
from limbo.analysis.tost import tost_clustered_arms
from limbo.analysis.uncertainty import Uncertainty

RISKY = ("no key, eventual read", "no key, no read")
AMBIGUOUS = ("timeout", "server_error", "connection_reset")
Finding = tuple[str, str, str, int]
"""(prediction, result, verdict, episodes)."""


def _pct(r: Rate) -> str:
    if r.n == 0:
        return t.EMPTY
    return f"{100 * r.rate:.1f}% " + ("[—]" if math.isnan(r.lo) else t.ends(r.lo, r.hi, 0,
                                                                              between="–"))


def _or(result: OddsRatio, label: str) -> str:
    if math.isnan(result.beta):
        return f"{label} not estimable ({result.note})"
    lo, hi = result.ci()
    text = f"{label} OR {t.odds(result.odds_ratio, lo, hi)}, {t.p_text(result.pvalue)}"
    return text + (f" [{result.note}]" if result.note else "")


def _firth(y: np.ndarray, x: np.ndarray) -> OddsRatio:
    beta, se = firth_logit(y, np.column_stack([np.ones(len(x)), x]))
    p = float(2 * dist.sf(abs(beta[1] / se[1])))
    return OddsRatio(float(beta[1]), float(se[1]), p, 0, "Firth, penalised: an arm is at 0%/100%")


def _glmm(y: np.ndarray, x: np.ndarray, clusters: pd.Series) -> OddsRatio:
    g = clusters.nunique()
    if g == len(clusters):
        return OddsRatio(math.nan, math.nan, math.nan, g, "not fitted: every episode its own "
                         "cluster (--cluster none)")
    if g < 2:
        return OddsRatio(math.nan, math.nan, math.nan, g, f"{g} cluster(s)")
    sep = separation(y, x)
    if sep:
        return OddsRatio(math.nan, math.nan, math.nan, g, sep)
    rows = pd.DataFrame({"g": clusters.to_numpy(), "x": x, "y": y})
    cells = rows.groupby(["g", "x"], observed=True)["y"].agg(["sum", "count"]).reset_index()
    fit = glmm_agq(cells["sum"], np.column_stack([np.ones(len(cells)), cells["x"]]),
                   cells["g"], trials=cells["count"], nagq=25)
    return fit.odds_ratio(1, g)


def _evidence(result: OddsRatio) -> int:
    """+1 when the interval is above 1, −1 when below, 0 otherwise or when not estimable."""
    lo, hi = result.ci()
    return 0 if math.isnan(lo) else (1 if lo > 1 else (-1 if hi < 1 else 0))


def _odds(u: Uncertainty, rows: pd.DataFrame, x: np.ndarray,
          mixed: bool) -> tuple[list[str], int]:
    """The GEE odds ratio (groups = the chosen clusters, bias-reduced covariance, t(G − 2)),
    the mixed-effects one if ``mixed`` (a random intercept per cluster), and Firth's when an
    arm is separated: their texts, and the evidence for OR > 1."""
    y, clusters = rows["duplicate"].to_numpy(float), u.labels(rows)
    structure = "independence" if u.cluster == "none" else "exchangeable"
    gee = gee_clustered(y, x, clusters, structure)
    df = "" if gee.df is None else f", df={gee.df:.0f}"
    texts = [_or(gee, f"GEE (G={gee.clusters}{df})")]
    if mixed:
        texts.insert(0, _or(_glmm(y, x, pd.Series(clusters)), "mixed-effects"))
    best = gee
    if math.isnan(gee.beta) and "separation" in gee.note:
        best = _firth(y, x)
        texts.append(_or(best, "Firth"))
    return texts, _evidence(best)


def _verdict(yes: bool, no: bool) -> str:
    return "supported" if yes else ("not supported" if no else "inconclusive")


def e1_rated(data: Data, modes: tuple[str, ...] | None = None) -> pd.DataFrame:
    """E1's rated episodes (under ``modes`` only, if given)."""
    rows = data.experiment("e1")
    keep = rows["rated"].to_numpy()
    if modes is not None:
        keep = keep & rows["fault"].isin(modes).to_numpy()
    return rows[keep]


def h1(data: Data) -> Finding:
    prediction = ("non-idempotent writes with an eventual or missing read path are duplicated "
                  "in ≥ 10% of committed-fault episodes, more than other writes")
    rows = e1_rated(data, paper.COMMITTED)
    x = rows["contract_class"].isin(RISKY).to_numpy(float)
    if rows.empty or x.min() == x.max():
        return prediction, "no E1 committed-fault episodes of both kinds of write", "untested", 0
    risky, other = data.rate(rows[x == 1], "duplicate"), data.rate(rows[x == 0], "duplicate")
    texts, evidence = _odds(data.uncertainty, rows, x, mixed=True)
    result = f"dup {_pct(risky)} vs {_pct(other)}; " + "; ".join(texts)
    return prediction, result, _verdict(risky.rate >= 0.10 and evidence > 0,
                                        risky.rate < 0.10 or evidence < 0), len(rows)


def _shares(result: Shapley) -> dict[str, float]:
    return {"contract": result.share["contract_class"], "model": result.share["model"],
            "harness": result.share["harness"]}


def h2(data: Data) -> Finding:
    prediction = "the contract explains more variance than the model; the harness ≥ 10%"
    blocks = shapley_blocks(data)
    pooled_rows = column_rows(blocks["E1"], "pooled")
    if pooled_rows.empty:
        return prediction, "no E1 committed-fault episodes", "untested", 0
    shares = {col: _shares(shapley_for(data, "E1", blocks["E1"], col)) for col in COLUMNS}
    harness = (_shares(shapley_for(data, "E3", blocks["E3"], "pooled"))["harness"]
               if "E3" in blocks else math.nan)
    pooled = shares["pooled"]
    result = (f"pooled shares: contract {_share(pooled['contract'])}, model "
              f"{_share(pooled['model'])}, harness {_share(harness)}; stratified: model "
              f"{_share(shares['read-back resolves']['model'])} on resolvable, contract "
              f"{_share(shares['read-back cannot']['contract'])} on unresolvable faults")
    contract = _verdict(pooled["contract"] > pooled["model"],
                        pooled["contract"] <= pooled["model"])
    harness_v = ("untested (one harness)" if math.isnan(harness)
                 else _verdict(harness >= 0.10, harness < 0.10))
    return (prediction, result, f"contract > model: {contract}; harness: {harness_v}",
            len(pooled_rows))


def _share(value: float) -> str:
    return t.EMPTY if math.isnan(value) else f"{100 * value:.0f}%"


def h3(data: Data) -> Finding:
    prediction = "given verification, eventual read paths yield more duplicates than strong"
    rows = e1_rated(data, paper.COMMITTED)
    rows = rows[rows["read_path"].isin(["eventual", "strong"]).to_numpy()]
    recovered = data.recoveries(rows)
    rows = rows[np.array([r is not None and r.verified for r in recovered], dtype=bool)]
    x = (rows["read_path"] == "eventual").to_numpy(float)
    if rows.empty or x.min() == x.max():
        return prediction, "no verified E1 episodes on both read paths", "untested", len(rows)
    eventual, strong = data.rate(rows[x == 1], "duplicate"), data.rate(rows[x == 0], "duplicate")
    texts, evidence = _odds(data.uncertainty, rows, x, mixed=False)
    result = f"dup eventual {_pct(eventual)} vs strong {_pct(strong)}; " + "; ".join(texts)
    return prediction, result, _verdict(evidence > 0, evidence < 0), len(rows)


def h4(data: Data) -> Finding:
    prediction = "blind re-issue does not differ between irreversible and reversible writes " \
                 "(TOST ±5 pp)"
    rows = e1_rated(data)
    rows = rows[(rows["group"] != "success").to_numpy()]  # a success hides nothing to recover
    recovered = data.recoveries(rows)
    keep = np.array([r is not None and r.error_kind in AMBIGUOUS for r in recovered], dtype=bool)
    rows, recovered = rows[keep], recovered[keep]
    rows = rows.assign(blind=[r.first == "re-issue" and not r.verified for r in recovered])
    rows = rows[rows["reversibility"].isin(["irreversible", "reversible"]).to_numpy()]
    first = (rows["reversibility"] == "irreversible").to_numpy()
    arms = [data.rate(rows[side], "blind") for side in (first, ~first)]
    if min(a.n for a in arms) == 0:
        return prediction, "no E1 ambiguous failures on both kinds of write", "untested", 0
    (a, b) = arms
    weights = np.ones(len(rows))  # each arm weighted within itself, as its rate is
    for side in (first, ~first):
        found = data.weights(rows[side])
        weights[side] = 1.0 if found is None else found
    test = tost_clustered_arms(rows["blind"].to_numpy(float), first,
                               data.uncertainty.labels(rows), weights)
    result = (f"blind re-issue: irreversible {_pct(a)}, reversible {_pct(b)}; difference "
              f"{100 * test.diff:+.1f} pp, 90% interval {100 * test.ci_lo:+.1f} to "
              f"{100 * test.ci_hi:+.1f} pp (t, df={test.clusters - 1}), TOST "
              f"{t.p_text(test.pvalue)}")
    outside = test.ci_lo >= test.margin or test.ci_hi <= -test.margin
    return prediction, result, _verdict(test.equivalent, outside), len(rows)


def h5(data: Data) -> Finding:
    prediction = "≥ 20% of duplicate-producing episodes end 'completed' with nothing uncertain"
    rated = e1_rated(data)
    rows = rated[rated["duplicate"].to_numpy()]
    if rows.empty:
        return prediction, "no E1 episode with a duplicate", "untested", 0
    clean = data.rate(rows, "claimed_clean")
    completed = data.rate(rows.assign(done=rows["report_status"] == "completed"), "done")
    wrong = rated[~rated["exactly_once"].to_numpy()]
    overclaim = data.rate(wrong, "overclaim")
    result = (f"claimed clean {_pct(clean)} of {len(rows)} duplicate episodes; reported "
              f"completed {_pct(completed)}; overclaim {_pct(overclaim)} of the {len(wrong)} "
              f"episodes not exactly once")
    return prediction, result, _verdict(clean.lo >= 0.20, clean.hi < 0.20), len(rows)


def h6(data: Data) -> Finding:
    prediction = "the guard brings duplicates to ≤ 2% in every harness with ≤ 3 pp TS loss"
    matched = guard_arms(data, "e3")
    if matched is None:
        return prediction, absent("e3"), "untested", 0
    rows = matched.rows
    rows = rows[rows["rated"].to_numpy() & (rows["fault"] != "none").to_numpy()]
    parts, passes = [], []
    for harness, block in rows.groupby("harness", sort=True, observed=True):
        guard = block[(block["condition"] == "guard").to_numpy()]
        vanilla = block[(block["condition"] == "vanilla").to_numpy()]
        if guard.empty or vanilla.empty:
            continue
        dup = data.rate(guard[guard["fault"].isin(paper.POOLED).to_numpy()], "duplicate")
        loss = data.rate(vanilla, "task_success").rate - data.rate(guard, "task_success").rate
        passes.append(dup.rate <= 0.02 and loss <= 0.03)
        parts.append(f"{harness}: dup {_pct(dup)} under guard, TS loss {100 * loss:+.1f} pp")
    if not parts:
        return prediction, "no harness with both vanilla and guard episodes", "untested", 0
    missing = [h for h in HARNESS_ORDER if h not in set(rows["harness"])]
    verdict = _verdict(all(passes), not all(passes))
    if missing and all(passes):
        verdict += f" (untested: {', '.join(missing)})"
    return prediction, "; ".join(parts), verdict, len(rows)


HYPOTHESES: dict[str, Callable[[Data], Finding]] = {"H1": h1, "H2": h2, "H3": h3, "H4": h4,
                                                    "H5": h5, "H6": h6}


def gee_note(u: Uncertainty) -> str:
    """How the odds ratios of H1 and H3 were fitted."""
    if u.cluster == "none":
        return ("Odds ratios: GEE logit with every episode its own group (--cluster none: "
                "independence working correlation), bias-reduced (Mancl–DeRouen) covariance, p "
                "and interval on t(G − 2); no mixed-effects model (no clusters).")
    groups = {"world": "worlds (template, instance)", "template": "task templates"}[u.cluster]
    return (f"Odds ratios: GEE logit with groups = the {groups}, exchangeable working "
            f"correlation, bias-reduced (Mancl–DeRouen) covariance, p and interval on t(G − 2) "
            f"(G clusters, two parameters); none with fewer than 5 clusters. Mixed-effects (H1): "
            f"a random intercept per cluster by ML, adaptive Gauss–Hermite, 25 nodes.")


def table12(data: Data) -> t.Table:
    """Each hypothesis with its prediction, the test's result, and a verdict."""
    table = t.Table(12, "Preregistered hypotheses and outcomes",
                    ["hypothesis", "prediction", "result", "verdict", "episodes"], keys=2)
    data.stamp(table)
    for name, test in HYPOTHESES.items():
        prediction, result, verdict, n = test(data)
        table.add(t.label(name), t.label(prediction), t.label(result), t.label(verdict),
                  t.count(n))
    u = data.uncertainty
    table.notes += ["Intervals 95% unless stated; rates weighted as in the other tables, "
                    f"their intervals on the effective n; {u.describe()}.",
                    gee_note(u),
                    "H4: TOST ±5 pp on the difference of the two arms' weighted rates with the "
                    "cluster-robust SE (the arms share clusters), 90% interval on t(K − 1).",
                    "H3 and H4 read the agent's recovery from the event log "
                    "(limbo.analysis.recovery).",
                    "H5's overclaim: share of E1's rated episodes that did not end exactly "
                    "once yet claimed a clean completion (interval as every rate's).",
                    "H6: E3's vanilla and guard arms on matched cells (comparison 'guard'); "
                    "TS loss = TS vanilla − TS guard over faulted rated episodes."]
    if all(row[3].shown == "untested" for row in table.rows):
        table.notes.append("Every hypothesis is untested — " + absent("e1", "e3"))
    return table
