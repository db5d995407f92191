"""Draw fewer points, keep what the eye reads: peaks, steps, the first and last point.

A chart of 30,000 engine steps has ~50 steps per pixel; drawing every one costs seconds and
shows nothing more. ``keep_indices`` keeps both sides of every change (the
corners of a staircase, the ends of a prefill jump), which draws the same step line exactly; when
there are too many corners it keeps, per bucket of equal pixel width, the first point of the
bucket's highest value, so no peak or step disappears.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
MAX_POINTS = 1500
"""Points per line at most: about two per pixel of a 720-pixel-wide chart."""


def corners(y: npt.NDArray[np.float64]) -> IntArray:
    """Both sides of every change of y (and the ends): a step-after line through them is exact."""
    n = len(y)
    if n <= 2:
        return np.arange(n, dtype=np.int64)
    jump = np.flatnonzero(np.diff(y) != 0) + 1
    return np.unique(np.concatenate(([0], jump - 1, jump, [n - 1]))).astype(np.int64)


def peak_indices(pos: npt.NDArray[np.float64], y: npt.NDArray[np.float64],
                 max_points: int) -> IntArray:
    """Per bucket of equal width in ``pos`` (pixel position), the first point of highest y."""
    span = float(pos[-1] - pos[0]) or 1.0
    bucket = np.floor((pos - pos[0]) / span * (max_points - 2)).astype(np.int64)
    order = np.lexsort((np.arange(len(y)), -y, bucket))
    first = order[np.concatenate(([True], np.diff(bucket[order]) != 0))]
    return np.unique(np.concatenate(([0], first, [len(y) - 1]))).astype(np.int64)


def keep_indices(pos: npt.NDArray[np.float64], y: npt.NDArray[np.float64],
                 max_points: int = MAX_POINTS) -> IntArray:
    """Indices to draw: every corner when they fit (exact), else each bucket's peak."""
    if len(y) <= max_points:
        return np.arange(len(y), dtype=np.int64)
    kept = corners(y)
    if len(kept) <= max_points:
        return kept
    return peak_indices(pos, y, max_points)


def downsample(
    x: npt.NDArray[np.float64], ys: dict[str, npt.NDArray[np.float64]],
    max_points: int = MAX_POINTS, *, log_x: bool = False,
) -> dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """Each series cut to at most ``max_points`` points; buckets even in log(1+x) if ``log_x``."""
    pos = np.log1p(np.maximum(x, 0.0)) if log_x else x
    out = {}
    for name, y in ys.items():
        idx = keep_indices(pos, y, max_points)
        out[name] = (x[idx], y[idx])
    return out
def even_sample(values: npt.NDArray[np.float64], max_marks: int) -> npt.NDArray[np.float64]:
    """At most ``max_marks`` of sorted event times, evenly by rank (first and last kept)."""
    if len(values) <= max_marks:
        return values
    v = np.sort(values)
    return v[np.linspace(0, len(v) - 1, max_marks).astype(np.int64)]
