"""Sampling error of a judged percentile: an exact order-statistic (binomial) interval.

Of n independent latencies, the number B below the true p-quantile q is Binomial(n, p), so
for 1-based order statistics x_(l) <= x_(u) of the sorted sample::

    P(x_(l) <= q) = P(B >= l) = 1 - F(l - 1)      F = the Binomial(n, p) CDF
    P(x_(u) >= q) = P(B <  u) = F(u - 1)

The 95 % interval takes the largest l with F(l - 1) <= 2.5 % and the smallest u with
F(u - 1) >= 97.5 %; no l exists (too few requests below) -> no lower edge, u > n (too few
above: a p99 needs at least 368 requests) -> no upper edge. Exact, distribution-free, and
O(sqrt(n)) work: the CDF is summed only over mean +- 10 standard deviations (the mass outside
is below 1e-20). A verdict is *within noise* when the limit lies inside the interval: another
sample of the same traffic could flip it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from kvplan.analysis.weighted import kth_percentile, linear_ranks

CONFIDENCE = 0.95
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A percentile's 95 % interval from ``n`` values; an edge is None where n is too small."""

    low: float | None
    high: float | None
    n: int

    def holds(self, limit: float) -> bool | None:
        """True: the whole interval is within ``limit``; False: all of it is over; None:
        the limit lies inside the interval (the verdict is within sampling noise)."""
        if self.high is not None and self.high <= limit:
            return True
        if self.low is not None and self.low > limit:
            return False
        return None


def _cdf_window(n: int, p: float) -> tuple[int, FloatArray]:
    """(k0, F[k0..k1]): the Binomial(n, p) CDF over mean +- 10 sd (exact log-pmf sums)."""
    sd = math.sqrt(n * p * (1 - p))
    k0 = max(0, int(n * p - 10 * sd) - 2)
    k1 = min(n, int(n * p + 10 * sd) + 2)
    k = np.arange(k0, k1 + 1, dtype=np.float64)
    logc = math.lgamma(n + 1) - np.array([math.lgamma(x + 1) + math.lgamma(n - x + 1)
                                          for x in k.tolist()])
    with np.errstate(divide="ignore"):
        logpmf = logc + k * math.log(p) + (n - k) * math.log1p(-p)
    return k0, np.cumsum(np.exp(logpmf))


@lru_cache(maxsize=1024)
def ranks(n: int, p: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) of the order statistics bounding the p-quantile (0 < p < 1); a
    pure function of its arguments, kept per (n, p, confidence): every fleet judged on one
    trace has the same n."""
    if n <= 0:
        return None, None
    alpha = (1 - confidence) / 2
    k0, cdf = _cdf_window(n, p)
    below = np.flatnonzero(cdf <= alpha)
    if len(below):
        low: int | None = k0 + int(below[-1]) + 1
    else:  # F(k0) > alpha already: the largest k with F(k) <= alpha is k0 - 1 (if any)
        low = k0 if k0 > 0 else None
    above = np.flatnonzero(cdf >= 1 - alpha)
    high = k0 + int(above[0]) + 1 if len(above) else None
    return low, None if high is None or high > n else high


def percentile_interval(values: FloatArray, percentile: float,
                        confidence: float = CONFIDENCE) -> Interval:
    """The interval around the ``percentile``-th percentile (0-100] of ``values``."""
    n = len(values)
    if n == 0:
        return Interval(low=None, high=None, n=0)
    if percentile >= 100:
        return Interval(low=float(np.max(values)), high=None, n=n)
    lo, hi = ranks(n, percentile / 100, confidence)
    kth = [r - 1 for r in (lo, hi) if r is not None]
    part = np.partition(values, kth) if kth else values
    return Interval(low=None if lo is None else float(part[lo - 1]),
                    high=None if hi is None else float(part[hi - 1]), n=n)


def judged_percentile(values: FloatArray, percentile: float, confidence: float = CONFIDENCE,
                      *, interval: bool = True) -> tuple[float, Interval | None]:
    """(np.percentile(values, percentile) to the bit, 0.0 when empty; ``percentile_interval``
    or None without ``interval``) from one partition: numpy's two order statistics, the
    interval's two and the last (NaN sorts there: numpy's answer is then NaN)."""
    n = len(values)
    if n == 0:
        return 0.0, Interval(low=None, high=None, n=0) if interval else None
    prev, nxt, _ = linear_ranks(n, percentile)
    lo = hi = None
    if interval and percentile < 100:
        lo, hi = ranks(n, percentile / 100, confidence)
    kth = sorted({prev, nxt, n - 1, *(r - 1 for r in (lo, hi) if r is not None)})
    part = np.partition(values, kth)
    last = float(part[n - 1])
    value = last if math.isnan(last) else kth_percentile(lambda k: float(part[k]), n,
                                                           percentile)
    if not interval:
        return value, None
    if percentile >= 100:
        return value, Interval(low=float(np.max(values)), high=None, n=n)
    return value, Interval(low=None if lo is None else float(part[lo - 1]),
                           high=None if hi is None else float(part[hi - 1]), n=n)


def share_interval(good: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a share ``good / n`` (the goodput share's sampling error)."""
    if n == 0:
        return Interval(low=None, high=None, n=0)
    z = 1.959963984540054 if confidence == CONFIDENCE else _z(confidence)
    s = good / n
    mid = (s + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(s * (1 - s) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(low=max(0.0, mid - half), high=min(1.0, mid + half), n=n)


def _z(confidence: float) -> float:
    """The two-sided normal quantile by bisection on erf (confidence levels other than 95 %)."""
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erf(mid / math.sqrt(2)) < confidence else (lo, mid)
    return (lo + hi) / 2
