"""Printed numbers claim no more than the method has (limbo.analysis.table): an interval's ends
to the same decimals and never alike unless they are; no interval where there is none, said
once; a Monte Carlo floor as a bound, a model-based p below 1e-6 as "< 1e-6"; and every CSV
number in the unit its entry shows."""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from limbo.analysis import table as t
from limbo.analysis.bootstrap import Interval
from limbo.analysis.cluster import clustered_rate


def interval(lo: float, hi: float, estimate: float = math.nan) -> Interval:
    return Interval(estimate, lo, hi, 1000, 12, 0, "seed")  # type: ignore[arg-type]


@pytest.mark.parametrize(("lo", "hi", "digits", "sign", "shown"), [
    (0.1321, 0.4249, 0, "", "[13, 42]"),
    (0.9961, 1.0, 0, "", "[99.6, 100.0]"),       # 100 and 100 would claim no width
    (0.999991, 1.0, 0, "", "[99.999, 100.000]"),
    (0.9999999, 1.0, 0, "", "[100.0000, 100.0000]"),  # at most four decimals
    (0.0, 0.004, 0, "", "[0.0, 0.4]"),
    (1.0, 1.0, 0, "", "[100, 100]"),              # alike only when they are
    (0.25, 0.2504, 1, "+", "[+25.00, +25.04]"),
])
def test_the_two_ends_have_the_same_decimals_and_differ_when_they_do(lo, hi, digits, sign,
                                                                      shown) -> None:
    assert t.ends(lo, hi, digits, sign) == shown


def test_a_cell_of_one_world_has_no_interval_and_the_table_says_why() -> None:
    """stats.md §8: K = 1 has no estimate. The rate stands, the interval is "[—]", and the
    table's notes say why — once, however many such cells."""
    one = clustered_rate([1, 0, 0, 0, 0], ["w"] * 5)
    table = t.Table(3, "x", ["model", "a", "b"])
    table.add(t.label("m"), t.rate(one), t.rate(one))
    assert table.rows[0][1].shown == "20.0 [—] 1/5"
    assert table.notes == [t.GAPS["one cluster"]]
    assert "[—] 1/5" in table.markdown() and t.GAPS["one cluster"] in table.markdown()
    row = next(r for r in csv.DictReader(io.StringIO(table.csv())) if r["column"] == "a")
    assert (row["value"], row["lo"], row["hi"], row["unit"]) == ("20.0", "", "", "%")


def test_a_bootstrap_whose_replicates_all_agree_shows_no_interval() -> None:
    table = t.Table(0, "x", ["family", "Δ (pp)", "share (%)"])
    table.add(t.label("f"), t.points(1.0, 75, interval(1.0, 1.0)),
              t.share(0.4, interval(0.4, 0.4)))
    assert [e.shown for e in table.rows[0][1:]] == ["+100.0 [—]", "40 [—]"]
    assert table.notes == [t.GAPS["no spread"]]
    kept = t.points(0.25, 75, interval(0.083, 0.417))
    assert kept.shown == "+25.0 [+8.3, +41.7]" and kept.gap == ""


@pytest.mark.parametrize(("p", "bound", "model", "shown"), [
    (2 / 2 ** 30, False, False, "1.9e-09"),     # exact: all the precision it has
    (1 / 100_001, True, False, "< 1e-05"),      # a Monte Carlo floor is a bound
    (6 / 100_001, True, False, "< 6e-05"),      # and stays one after Holm
    (1.4e-42, False, True, "< 1e-6"),            # a mixed-model or GEE p on a few dozen worlds
    (3.2e-6, False, True, "3.2e-06"),
    (0.031, False, True, "0.031"),
    (math.nan, False, True, "—"),
])
def test_p_values_claim_only_the_precision_they_have(p, bound, model, shown) -> None:
    entry = t.pvalue(p, bound=bound, model=model)
    assert entry.shown == shown
    assert entry.value == p or math.isnan(p)


def test_p_in_a_sentence() -> None:
    assert t.p_text(6.4e-24) == "p < 1e-6" and t.p_text(0.0022) == "p=0.0022"


@pytest.mark.parametrize(("estimate", "lo", "hi", "shown"), [
    (2.5368, 0.9512, 6.6031, "2.54 (0.95–6.60)"),
    (4.5, 3.81, 5.23, "4.5 (3.8–5.2)"),
    (31.2, 12.4, 80.1, "31 (12–80)"),
])
def test_an_odds_ratio_and_its_interval_share_their_decimals(estimate, lo, hi, shown) -> None:
    assert t.odds(estimate, lo, hi) == shown


def test_every_csv_number_is_in_the_unit_its_entry_shows() -> None:
    """"EOS guard (%)" 65.12 beside "gain (pp)" 11.76, a rate in percent with its interval and
    bootstrap, a count and a p as they are: one unit per column, named in the unit field."""
    r = clustered_rate([1, 1, 0, 0, 0, 0, 1, 0], list("aabbccdd"))
    table = t.Table(13, "x", ["contract", "dup", "EOS guard (%)", "EOS gain (pp)", "pairs",
                              "sign-flip p", "time (min)"])
    table.add(t.label("native"), t.rate(r, boot=interval(0.1, 0.6)), t.number(65.12, 40),
              t.points(0.1176, 40), t.count(40), t.pvalue(0.0123), t.number(3.5, 40))
    rows = {r["column"]: r for r in csv.DictReader(io.StringIO(table.csv()))}
    assert rows["dup"]["unit"] == "%" and float(rows["dup"]["value"]) == pytest.approx(37.5)
    assert float(rows["dup"]["lo"]) == pytest.approx(100 * r.lo)
    assert float(rows["dup"]["hi"]) == pytest.approx(100 * r.hi)
    assert (float(rows["dup"]["boot_lo"]), float(rows["dup"]["boot_hi"])) == pytest.approx(
        (10.0, 60.0))
    assert float(rows["dup"]["denominator"]) == 8 and float(rows["dup"]["numerator"]) == 3
    assert (rows["EOS guard (%)"]["unit"], rows["EOS guard (%)"]["value"]) == ("%", "65.12")
    assert rows["EOS gain (pp)"]["unit"] == "pp"
    assert float(rows["EOS gain (pp)"]["value"]) == pytest.approx(11.76)
    assert (rows["pairs"]["unit"], rows["pairs"]["value"]) == ("", "40.0")
    assert (rows["sign-flip p"]["unit"], rows["sign-flip p"]["value"]) == ("", "0.0123")
    assert (rows["time (min)"]["unit"], rows["time (min)"]["value"]) == ("min", "3.5")


def test_limbo_tables_on_one_world_prints_no_interval(tmp_path: Path) -> None:
    """Must-show 3's other half, end to end: an E1 run of one template and one instance is one
    world; Table 3 prints each rate with "[—]" and says there is no interval, and the CSV has the
    rate (in percent) without one."""
    limbo = str(Path(sys.executable).parent / "limbo")
    env = {**os.environ}
    done = subprocess.run([limbo, "run", "e1", "--template", "charge_invoice", "--instances", "1",
                           "--model", "policy/verify", "--out", str(tmp_path / "one"), "--quiet"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([limbo, "tables", str(tmp_path / "one"), "--table", "3"],
                           capture_output=True, text=True, timeout=600, env=env).stdout
    row = next(line for line in shown.splitlines() if line.startswith("| policy/verify |"))
    assert "0.0 [—] 0/4" in row and "[" not in row.replace("[—]", "")
    assert f"- {t.GAPS['one cluster']}" in shown.splitlines()
    cells = list(csv.DictReader(io.StringIO(subprocess.run(
        [limbo, "tables", str(tmp_path / "one"), "--table", "3", "--format", "csv"],
        capture_output=True, text=True, timeout=600, env=env).stdout)))
    eos = next(c for c in cells if c["row"] == "policy/verify" and c["column"].startswith("EOS"))
    assert (eos["clusters"], eos["lo"], eos["hi"], eos["unit"]) == ("1.0", "", "", "%")
    assert float(eos["value"]) == pytest.approx(
        100 * float(eos["numerator"]) / float(eos["denominator"]))  # one template: unweighted
