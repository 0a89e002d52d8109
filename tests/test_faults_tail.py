"""The heavy tail of ``timeout_late_tail``: its quantiles, its bounds, its draw discipline."""

from __future__ import annotations

import pytest

from limbo.base.rng import generator
from limbo.faults import tail

N = 20_000
TABLE_6 = {60.0: 0.12, 120.0: 0.29, 300.0: 0.50, 3600.0: 0.93}


@pytest.fixture(scope="module")
def draws() -> list[float]:
    rng = generator(0, "test.tail")
    return [tail.draw(rng) for _ in range(N)]


def test_all_draws_lie_in_the_window(draws: list[float]) -> None:
    assert min(draws) >= 40.0 and max(draws) <= 7200.0
    assert max(draws) > 5000.0  # the tail really is heavy: two hours are reached


@pytest.mark.parametrize("delta,p", sorted(TABLE_6.items()))
def test_empirical_quantiles_match_table_6(draws: list[float], delta: float, p: float) -> None:
    share = sum(d <= delta for d in draws) / N
    assert abs(share - p) <= 0.01, (delta, share)


@pytest.mark.parametrize("delta,p", sorted(TABLE_6.items()))
def test_the_law_itself_matches_table_6(delta: float, p: float) -> None:
    assert abs(tail.cdf(delta) - p) <= 0.005
    assert tail.quantile(tail.cdf(delta)) == pytest.approx(delta)


def test_one_uniform_per_draw() -> None:
    """A draw takes exactly one number from the generator, so nothing else shifts."""
    a, b = generator(7, "x"), generator(7, "x")
    tail.draw(a)
    b.random()
    assert a.random() == b.random()


def test_bounds_of_the_law() -> None:
    assert tail.cdf(40.0) == 0.0 and tail.cdf(7200.0) == 1.0
    assert tail.quantile(1.0) <= 7200.0
    with pytest.raises(ValueError):
        tail.quantile(0.0)
