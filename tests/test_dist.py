"""limbo.analysis.dist gives scipy.stats' normal and t numbers bit for bit, edges included, and
the tables that need no model fit import neither scipy.stats nor statsmodels."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from limbo.analysis import dist

QS = [1e-300, 1e-12, 0.0005, 0.025, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995,
      1 - 1e-12, 0.0, 1.0, -0.2, 1.5, math.nan, 1, 0, np.float64(0.975)]
XS = [0.0, -0.0, 1e-9, 0.3, 1.0, 1.959963984540054, 2.5, 8.0, 38.5, -0.3, -2.5, -40.0,
      math.inf, -math.inf, math.nan, 3, np.float64(-1.25)]
DFS = [None, 1, 2, 3.5, 5, 15, 29, 47, 1e6, math.inf, 0, -1, math.nan, np.float64(4.0)]


def _same(ours: object, theirs: object) -> None:
    assert type(ours) is type(theirs)
    assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes()  # NaN and -0.0 alike


def _scipy(df: float | None) -> tuple[object, tuple[float, ...]]:
    return (stats.norm, ()) if df is None else (stats.t, (df,))


@pytest.mark.parametrize("df", DFS)
def test_quantiles_are_scipy_stats_bit_for_bit(df: float | None) -> None:
    law, shape = _scipy(df)
    for q in QS:
        _same(dist.ppf(q, df), law.ppf(q, *shape))


@pytest.mark.parametrize("df", DFS)
def test_tails_are_scipy_stats_bit_for_bit(df: float | None) -> None:
    law, shape = _scipy(df)
    for x in XS:
        _same(dist.sf(x, df), law.sf(x, *shape))
        _same(dist.cdf(x, df), law.cdf(x, *shape))


def test_an_array_goes_to_scipy_stats_whole() -> None:
    q = np.array([0.0, 0.5, 0.975, 1.0])
    _same(dist.ppf(q), stats.norm.ppf(q))
    _same(dist.sf(q, 3), stats.t.sf(q, 3))


def _loaded_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\n"
                           "print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_tables_import_no_statistics_package_until_a_model_is_fitted(tmp_path) -> None:
    from limbo.cli import main

    run = tmp_path / "run"
    assert main(["run", "--template", "charge_invoice", "--model", "policy/verify", "--fault",
                 "timeout_post", "--out", str(run), "--quiet"]) == 0
    found = _loaded_after(
        "from pathlib import Path\nfrom limbo.analysis.data import Data\n"
        "from limbo.analysis.loader import load\nfrom limbo.analysis.tables import TABLES\n"
        "import limbo.commands.tables, limbo.commands.figures, limbo.analysis.uncertainty\n"
        f"data = Data(load([Path({str(run)!r})]))\n"
        "for n in (0, 3, 4, 5, 6, 7, 8, 9, 10, 14, 15, 16):\n    TABLES[n](data)\n")
    assert not {"scipy.stats", "scipy.optimize"} & found
    assert not {m.split(".")[0] for m in found} & {"statsmodels", "matplotlib"}


def test_every_table_reads_the_log_alone_and_loads_no_harness(tmp_path, monkeypatch) -> None:
    """What the tables say of a run — Table 8's note of the paper's harnesses without
    episodes, H5's untested ones — comes from the paper's list and the records, never from the
    harnesses registered on the reading machine: a plugin or an installed production harness
    changes no table, and reading a run loads no harness (nor the simulation's world)."""
    from limbo.cli import main

    monkeypatch.setenv("LIMBO_HARNESS_DIR", str(tmp_path / "none"))  # no production harness
    run = tmp_path / "run"  # E3 in the minimal harness: Tables 8, 9 and H5 have rows
    assert main(["run", "e3", "--template", "charge_invoice", "--instances", "1", "--out",
                 str(run), "--quiet"]) == 0
    found = _loaded_after(
        "from pathlib import Path\nfrom limbo.analysis.data import Data\n"
        "from limbo.analysis.loader import load\nfrom limbo.analysis.tables import TABLES\n"
        f"data = Data(load([Path({str(run)!r})]))\n"
        "for table in TABLES.values():\n    table(data)\n")
    assert not {m for m in found if m.startswith("limbo.harnesses") or m == "limbo.sim.world"}


@pytest.mark.parametrize("x", [0.0, 1e-300, 1e-12, 0.003, 0.5, 1.0, 3.84, 7.5, 40.0, 800.0])
def test_durkalskis_tail_is_scipy_stats_bit_for_bit(x: float) -> None:
    from scipy import special

    assert special.chdtrc(1, x) == stats.chi2.sf(x, 1)


@pytest.mark.parametrize("n", [1, 2, 7, 30, 31, 200, 1001])
def test_the_exact_mcnemar_tail_is_the_binomial_one(n: int) -> None:
    from limbo.analysis.paired import half_binomial_cdf

    for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        exact = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
        assert half_binomial_cdf(k, n) == exact  # correctly rounded, so equal to the last bit
        assert exact == pytest.approx(float(stats.binom.cdf(k, n, 0.5)), rel=1e-12, abs=1e-300)
