"""Statistics of a sample held as (value, count) pairs, never expanded: the mean, population
std, median and linear percentiles numpy gives on the expanded array.

    sample = value_0 x count_0, value_1 x count_1, ...      N = sum(counts)

Order statistics are found on the sorted values' running counts, then combined with numpy's
own formulas (np.median: the mean of the middle one or two; np.percentile, method 'linear':
index (N - 1) * p / 100 and numpy's lerp), so the median and percentiles equal numpy's to the
bit. Sums are exact: sum(value * count) rounded once to float64 (``exact_dot``), where
numpy's pairwise summation may differ from that in the last bits (relative error about
log2(N) * 1.1e-16); the mean is that sum / N and the std sqrt(sum((value - mean)^2 * count) / N),
as numpy's ``_var`` computes them.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_PIECE = 18
"""Mantissas are summed in 18-bit pieces: piece * count stays exact in a float64 bucket."""
_MASK = (1 << _PIECE) - 1


@dataclass(frozen=True, slots=True)
class Summary:
    """mean / median / population std / (percentile, value) pairs of a weighted sample."""

    mean: float
    median: float
    std: float
    percentiles: tuple[tuple[float, float], ...]


def summarize(values: FloatArray, counts: IntArray, percentiles: Sequence[float]) -> Summary:
    """numpy's mean, median, std and percentiles of ``values`` each repeated ``counts`` times
    (an empty sample counts as [0], as vLLM's metrics do). Values must be finite."""
    keep = counts > 0
    v = np.asarray(values, dtype=np.float64)[keep]
    c = np.asarray(counts, dtype=np.int64)[keep]
    if len(v) == 0:
        v, c = np.zeros(1), np.ones(1, dtype=np.int64)
    n = int(c.sum())
    mean = exact_dot(v, c) / n
    d = v - mean
    std = float(np.sqrt(exact_dot(d * d, c) / n))
    order = np.argsort(v)  # ties are equal values: any order of them gives the same kth
    sv, cum = v[order], np.cumsum(c[order])

    def kth(k: int) -> float:  # the k-th smallest element (0-based) of the expanded sample
        return float(sv[int(np.searchsorted(cum, k, side="right"))])

    half = n // 2
    mid = [kth(half)] if n % 2 else [kth(half - 1), kth(half)]
    median = float(np.mean(np.array(mid)))
    pct = tuple((float(p), kth_percentile(kth, n, float(p))) for p in percentiles)
    return Summary(mean=mean, median=median, std=std, percentiles=pct)


def sorted_percentile(sv: FloatArray, p: float) -> float:
    """np.percentile(x, p) given ``sv``, x sorted (non-empty, no NaN), to the bit, without the
    numpy.ma import np.percentile makes (np.unique's, about 6 ms of a simulate run)."""
    return kth_percentile(lambda k: float(sv[k]), len(sv), p)


def counted_percentile(values: FloatArray, counts: IntArray, p: float) -> float:
    """np.percentile(x, p) of ``values`` each repeated ``counts`` times, to the bit (at least
    one count, no NaN value): the order statistics read off the sorted values' running
    counts, as ``summarize`` does."""
    return counted_percentiles(values, counts, [p])[0]


def counted_percentiles(values: FloatArray, counts: IntArray, ps: Sequence[float]) -> list[float]:
    """``counted_percentile`` for each p in ``ps``, the values sorted once."""
    keep = counts > 0
    v, c = values[keep], counts[keep]
    order = np.argsort(v)  # ties are equal values: any order of them gives the same kth
    sv, cum = v[order], np.cumsum(c[order])

    def kth(k: int) -> float:
        return float(sv[int(np.searchsorted(cum, k, side="right"))])

    return [kth_percentile(kth, int(cum[-1]), float(p)) for p in ps]


def linear_ranks(n: int, p: float) -> tuple[int, int, float]:
    """(previous, next, virtual index): the 0-based order statistics np.percentile(x, p) of N
    values interpolates between (numpy._quantile, _get_indexes: the last one when the index
    is at or past it) and numpy's virtual index (n - 1) * p / 100."""
    vi = (n - 1) * float(np.true_divide(p, 100))
    if vi >= n - 1:
        return n - 1, n - 1, vi
    prev = math.floor(vi)  # 0 <= p <= 100: vi >= 0
    return prev, prev + 1, vi


def kth_percentile(kth: Callable[[int], float], n: int, p: float) -> float:
    """np.percentile(x, p) of the N-element sample given its k-th smallest element (numpy's
    'linear' method, step by step: numpy._quantile, _get_indexes, _get_gamma, _lerp)."""
    prev, nxt, vi = linear_ranks(n, p)
    a, b = kth(prev), kth(nxt)
    t = vi - (-1 if prev == n - 1 else prev)  # numpy's index there is -1 (the last element)
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def exact_dot(values: FloatArray, counts: IntArray) -> float:
    """sum(values * counts) computed exactly and rounded once to float64 (finite values,
    counts >= 0 and below 2**34).

    Each value is m * 2**(e - 53) with an integer m (|m| < 2**53), cut into three 18-bit
    pieces; piece * count is summed per exponent in float64 buckets kept below 2**53 (so
    exact), and the buckets are added as Python integers: one rounding, at the end.
    """
    if len(values) == 0:
        return 0.0
    fast = _compiled()
    if fast is not None:  # the same exact sum, one pass in C (analysis/_exact.c)
        low, slots = fast.exact_dot(np.ascontiguousarray(values, dtype=np.float64),
                                    np.ascontiguousarray(counts, dtype=np.int64))
        return _rounded(sum(((hi << 64) + lo) << s for s, hi, lo in slots), low - 53)
    frac, exp = np.frexp(np.asarray(values, dtype=np.float64))
    mant = np.ldexp(frac, 53).astype(np.int64)
    low = int(exp.min())
    slot = (exp - low).astype(np.int64)
    width = int(slot.max()) + 1
    c = np.asarray(counts, dtype=np.int64)
    step = max(1, (1 << (52 - _PIECE)) // max(1, int(c.max())))
    cf = c.astype(np.float64)
    total = 0
    for a in range(0, len(mant), step):
        m, w, s = mant[a:a + step], cf[a:a + step], slot[a:a + step]
        for shift in (0, _PIECE, 2 * _PIECE):
            piece = (m >> shift) if shift == 2 * _PIECE else (m >> shift) & _MASK
            sums = np.bincount(s, weights=piece * w, minlength=width).tolist()
            total += sum(int(x) << (i + shift) for i, x in enumerate(sums) if x)
    return _rounded(total, low - 53)


def _rounded(total: int, scale: int) -> float:
    """total * 2**scale rounded once to float64 (int / int is correctly rounded)."""
    return float(total << scale) if scale >= 0 else total / (1 << -scale)


def _compiled() -> Any:
    """analysis/_exact.c's module where it was built (and KVPLAN_SIM_CORE is not "python",
    which runs every pure-Python path), else None."""
    if os.environ.get("KVPLAN_SIM_CORE", "").strip().lower() == "python":
        return None
    try:
        return importlib.import_module("kvplan.analysis._exact")
    except ImportError:
        return None
