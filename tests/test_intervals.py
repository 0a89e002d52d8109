"""The plain-Python intervals ``limbo run`` prints (no numpy or scipy at run time), checked
against scipy and the reference values of ``reference/stats.md``."""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as student

from limbo.base.intervals import clustered_mean, t_cdf, t_quantile, wilson


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 10, 19, 47, 120, 1001])
def test_t_matches_scipy(df: int) -> None:
    for p in (0.6, 0.9, 0.95, 0.975, 0.995, 0.9995):
        assert t_quantile(p, df) == pytest.approx(student.ppf(p, df), rel=1e-9)
        assert t_quantile(1 - p, df) == pytest.approx(student.ppf(1 - p, df), rel=1e-9)
    for x in (-30.0, -2.0, -0.3, 0.0, 0.5, 1.96, 4.0, 300.0):
        assert t_cdf(x, df) == pytest.approx(student.cdf(x, df), abs=1e-13)


@pytest.mark.parametrize("bad", [(0.0, 3), (1.0, 3), (0.5, 0), (math.nan, 3)])
def test_t_refuses_what_has_no_quantile(bad: tuple[float, int]) -> None:
    with pytest.raises(ValueError):
        t_quantile(*bad)


@pytest.mark.parametrize(("x", "n", "lo", "hi"), [
    (0, 10, 0, 0.2775328), (10, 10, 0.7224672, 1), (3, 10, 0.10779127, 0.60322185),
    (17, 50, 0.22436949, 0.47846174), (123, 1000, 0.10407414, 0.14481123),
    (12.5, 40.3, 0.18923981, 0.46414727)])
def test_wilson_reference_values(x: float, n: float, lo: float, hi: float) -> None:
    """reference/stats.md §1's table."""
    found = wilson(x, n)
    assert found[0] == pytest.approx(lo, rel=1e-6, abs=1e-12)
    assert found[1] == pytest.approx(hi, rel=1e-6)


def test_wilson_of_nothing_is_nan() -> None:
    assert all(math.isnan(v) for v in wilson(0, 0))


def test_clustered_mean_by_hand() -> None:
    """Three worlds: sums 2.0, 0.5, 1.5 over 3, 2, 4 cells."""
    found = clustered_mean([(2.0, 3), (0.5, 2), (1.5, 4)])
    est = 4.0 / 9
    var = 3 / 2 * ((2.0 - 3 * est) ** 2 + (0.5 - 2 * est) ** 2 + (1.5 - 4 * est) ** 2) / 81
    n_eff = min(9.0, est * (1 - est) / var)
    q = student.ppf(0.975, 2)
    centre = (est + q * q / (2 * n_eff)) / (1 + q * q / n_eff)
    half = q * math.sqrt(est * (1 - est) / n_eff + q * q / (4 * n_eff ** 2)) / (1 + q * q / n_eff)
    assert (found.units, found.clusters) == (9, 3)
    assert found.estimate == pytest.approx(est)
    assert found.n_eff == pytest.approx(n_eff)
    assert (found.lo, found.hi) == pytest.approx((centre - half, centre + half))


def test_clustered_mean_when_nothing_varies_counts_worlds() -> None:
    """Every cell passed: the interval is that of K observations, not of every cell."""
    found = clustered_mean([(4.0, 4)] * 6)
    assert found.estimate == 1.0 and found.n_eff == 6 and found.hi == 1.0
    assert found.lo == pytest.approx(wilson(6, 6, t_quantile(0.975, 5))[0])
    one = clustered_mean([(1.0, 3)])
    assert one.clusters == 1 and math.isnan(one.lo) and one.shown() == "33.3%"
    assert clustered_mean([]).shown() == "—"
