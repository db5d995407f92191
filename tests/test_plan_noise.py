"""Percentiles with their sampling error: exact order-statistic intervals, cheap."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from kvplan.analysis.plan.judge import Latencies, judge
from kvplan.analysis.plan.noise import percentile_interval, ranks, share_interval
from tests.plan_helpers import slo


def _pmf(n: int, p: float, k: int) -> Fraction:
    q = Fraction(p).limit_denominator(1000)
    return math.comb(n, k) * q**k * (1 - q) ** (n - k)


def _cdf(n: int, p: float, k: int) -> float:
    """P(B <= k), B ~ Binomial(n, p), in exact rational arithmetic."""
    return float(sum(_pmf(n, p, j) for j in range(k + 1)))


def _coverage(n: int, p: float, lo: int, hi: int) -> float:
    """P(x_(lo) <= q < x_(hi)) = P(lo <= B < hi), summed exactly."""
    return float(sum(_pmf(n, p, k) for k in range(lo, hi)))


def test_median_of_100_is_bracketed_by_the_40th_and_61st() -> None:
    # the textbook distribution-free 95 % interval for the median of 100 values
    assert ranks(100, 0.5) == (40, 61)
    assert _coverage(100, 0.5, 40, 61) == pytest.approx(0.9648, abs=1e-4)


def test_a_p99_needs_368_requests_for_an_upper_edge() -> None:
    # P(all n below the p99) = 0.99^n must fall to 2.5 %: 0.99^367 = 0.02501, 0.99^368 = 0.02476
    assert ranks(367, 0.99)[1] is None
    assert ranks(368, 0.99)[1] == 368
    assert ranks(500, 0.99) == (490, 500)  # 500 requests: a p99 is "5 requests"


@pytest.mark.parametrize(("n", "p"), [(200, 0.9), (1000, 0.99), (2000, 0.5), (50, 0.2)])
def test_intervals_are_the_tightest_with_95_percent_each_side(n: int, p: float) -> None:
    lo, hi = ranks(n, p)
    assert lo is not None and hi is not None
    assert _cdf(n, p, lo - 1) <= 0.025 < _cdf(n, p, lo)  # the largest l: F(l-1) <= 2.5 %
    assert _cdf(n, p, hi - 2) < 0.975 <= _cdf(n, p, hi - 1)  # the smallest u
    assert _coverage(n, p, lo, hi) >= 0.95


def test_percentile_interval_reads_the_order_statistics() -> None:
    v = np.arange(1.0, 101.0)[::-1].copy()  # 100..1, unsorted on purpose
    ci = percentile_interval(v, 50)
    assert (ci.low, ci.high, ci.n) == (40.0, 61.0, 100)
    assert ci.holds(70.0) is True and ci.holds(30.0) is False and ci.holds(50.0) is None
    top = percentile_interval(v, 99)
    assert top.low == 97.0 and top.high is None  # too few values above a p99 of 100


def test_wilson_interval_of_a_share() -> None:
    ci = share_interval(50, 100)
    # centre 0.5; half-width 1.96 sqrt(0.25/100 + 1.96^2/40000) / (1 + 1.96^2/100) = 0.0962
    assert ci.low == pytest.approx(0.5 - 0.0962, abs=1e-4)
    assert ci.high == pytest.approx(0.5 + 0.0962, abs=1e-4)


def _lat(ttft_ms: np.ndarray) -> Latencies:
    n = len(ttft_ms)
    return Latencies(arrival_s=np.arange(n, dtype=np.float64), ttft_ms=ttft_ms,
                     tpot_ms=np.full(n, np.nan), e2el_ms=ttft_ms, itl_ms=np.zeros(0),
                     itl_req=np.zeros(0, dtype=np.int64), output_tokens=np.ones(n, np.int64))


def test_a_verdict_says_when_it_is_within_noise() -> None:
    ttft = np.arange(1.0, 1001.0)  # 1..1000 ms; the warm-up drops the first 100
    judged = ttft[100:]
    lo, hi = ranks(len(judged), 0.99)
    assert lo is not None and hi is not None
    # the p99 of 101..1000 is 991.01 ms, its interval [985, 997]: a limit of 985.5 ms misses
    # and one of 995 ms passes, both within the noise; 2000 ms passes clear of it
    assert (judged[lo - 1], judged[hi - 1]) == (985.0, 997.0)
    miss = judge(_lat(ttft), slo("ttft:p99:985.5"))
    near = judge(_lat(ttft), slo("ttft:p99:995"))
    assert dict(miss.achieved)["p99_ttft_ms"] == pytest.approx(991.01)
    assert not miss.ok and near.ok
    assert miss.within_noise == near.within_noise == ("p99_ttft_ms",)
    clear = judge(_lat(ttft), slo("ttft:p99:2000"))
    assert clear.ok and clear.within_noise == ()
    ci = dict(clear.intervals)["p99_ttft_ms"]
    assert (ci.low, ci.high, ci.n) == (judged[lo - 1], judged[hi - 1], 900)
