"""Monotone interpolation on one slice of a table: piecewise linear in log-latency over
log-size along each axis; past the last node t ~ size**e (the roofline from the edge); before
the first node the first node's time (a latency floor)."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.result import FloatArray, Status, StatusArray
from kvplan.costs.kernels.tables import Table

_TINY = 1e-300


def lookup(table: Table, row: int, coords: tuple[npt.ArrayLike, ...]) -> tuple[FloatArray,
                                                                                 StatusArray]:
    """Seconds at each broadcast point of ``coords`` (one per axis) and each point's Status.

    Interpolation is multilinear in (log size -> log seconds); with a grid that is
    non-decreasing along every axis (the derive script makes it so) the answer is
    non-decreasing in every size, inside and outside the measured range.
    """
    logt, extra, outside, weights, filled = _interpolate(table, row, coords, True)
    assert outside is not None and filled is not None
    on_node = _all([(w < 1e-9) | (w > 1 - 1e-9) for w in weights])
    status = np.where(outside | filled, Status.EXTRAPOLATED,
                      np.where(on_node, Status.MEASURED, Status.INTERPOLATED)).astype(np.int8)
    return np.exp(logt + extra), status


def seconds(table: Table, row: int, coords: tuple[npt.ArrayLike, ...]) -> FloatArray:
    """``lookup``'s seconds alone: the same operations on the same numbers (the same bits),
    without working out each point's Status (most of a long GEMM line's cost)."""
    logt, extra, _, _, _ = _interpolate(table, row, coords, False)
    return np.exp(logt + extra)


def _interpolate(table: Table, row: int, coords: tuple[npt.ArrayLike, ...], status: bool
                 ) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_] | None,
                            list[FloatArray], npt.NDArray[np.bool_] | None]:
    """(log seconds inside the grid, the log excess past its last nodes, whether each point
    is outside, the per-axis weights, whether a filled node was used); the masks only when
    ``status``."""
    points = [np.asarray(c, dtype=np.float64) for c in coords]
    shape = np.broadcast_shapes(*(p.shape for p in points))  # each axis at its own size:
    extra = np.zeros(shape)  # a GEMM's n and k are one value beside 8,192 token counts
    outside = np.zeros(shape, dtype=bool) if status else None
    lows, weights = [], []
    for x, lax, exponent in zip(points, table.log_axes, table.exponents, strict=True):
        lx = np.log(np.maximum(x, _TINY))
        above = lx > lax[-1]
        extra += np.where(above, exponent * (lx - lax[-1]), 0.0)
        if outside is not None:
            outside |= above | (lx < lax[0])
        low, weight = _bracket(lax, np.clip(lx, lax[0], lax[-1]))
        lows.append(low)
        weights.append(weight)
    one_line = len(points) > 1 and all(p.ndim == 0 for p in points[1:])
    if one_line:
        logt, filled = _line_corners(table, row, lows, weights, status)
    else:
        logt, filled = _corners(table, row, lows, weights)
    return logt, extra, outside, weights, filled


def _bracket(lax: FloatArray, lx: FloatArray) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Lower node index and the fraction of the way to the next node, per point."""
    if lax.size == 1:
        return np.zeros(lx.shape, dtype=np.intp), np.zeros(lx.shape)
    low = np.clip(np.searchsorted(lax, lx, side="right") - 1, 0, lax.size - 2)
    weight = (lx - lax[low]) / (lax[low + 1] - lax[low])
    return low, np.clip(weight, 0.0, 1.0)


def _corners(table: Table, row: int, lows: list[npt.NDArray[np.intp]],
             weights: list[FloatArray]) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Multilinear value from the 2**d surrounding nodes, as successive lerps (one axis at a
    time, each clamped between its two ends so rounding never breaks monotonicity); and
    whether any node used was filled."""
    grid = table.logt[row].astype(np.float64)
    holes = table.filled[row]
    values: list[FloatArray] = []
    filled = np.zeros(np.broadcast_shapes(*(lo.shape for lo in lows)), dtype=bool)
    for bits in itertools.product((0, 1), repeat=len(lows)):
        index = tuple(np.minimum(lo + b, n - 1)
                      for lo, b, n in zip(lows, bits, grid.shape, strict=True))
        values.append(grid[index])
        used = _all([(w > 1e-12) if b else (w < 1 - 1e-12)
                     for w, b in zip(weights, bits, strict=True)])
        filled |= used & holes[index]
    for w in reversed(weights):  # the last axis varies fastest in product order
        values = [_lerp(lo, hi, w) for lo, hi in zip(values[0::2], values[1::2], strict=True)]
    return values[0], filled


def _line_corners(table: Table, row: int, lows: list[npt.NDArray[np.intp]],
                  weights: list[FloatArray], status: bool = True
                  ) -> tuple[FloatArray, npt.NDArray[np.bool_] | None]:
    """``_corners`` when every axis but the first is one value (a GEMM's n and k beside a
    line of token counts): the trailing axes are lerped once per node of the first axis, in
    the same order with the same weights, then read at each point's two first-axis nodes.
    Elementwise the same operations on the same numbers, so the same bits as ``_corners``.
    The filled mask only when ``status``."""
    grid = table.logt[row].astype(np.float64)
    holes = table.filled[row]
    n0 = grid.shape[0]
    lines: list[FloatArray] = []
    hole_lines: list[npt.NDArray[np.bool_]] = []
    used_tail: list[npt.NDArray[np.bool_]] = []
    for bits in itertools.product((0, 1), repeat=len(lows) - 1):
        index = (slice(None), *(np.minimum(lo + b, n - 1) for lo, b, n in
                                zip(lows[1:], bits, grid.shape[1:], strict=True)))
        lines.append(grid[index])
        hole_lines.append(holes[index])
        used_tail.append(_all([(w > 1e-12) if b else (w < 1 - 1e-12)
                               for w, b in zip(weights[1:], bits, strict=True)]))
    for w in reversed(weights[1:]):
        lines = [_lerp(lo, hi, w) for lo, hi in zip(lines[0::2], lines[1::2], strict=True)]
    at = [np.minimum(lows[0] + b, n0 - 1) for b in (0, 1)]
    w0 = weights[0]
    if not status:
        return _lerp(lines[0][at[0]], lines[0][at[1]], w0), None
    filled = np.zeros(lows[0].shape, dtype=bool)
    for b, idx in enumerate(at):
        used0 = (w0 > 1e-12) if b else (w0 < 1 - 1e-12)
        for tail, hole_line in zip(used_tail, hole_lines, strict=True):
            filled |= used0 & tail & hole_line[idx]
    return _lerp(lines[0][at[0]], lines[0][at[1]], w0), filled


def _all(masks: list[npt.NDArray[np.bool_]]) -> npt.NDArray[np.bool_]:
    """Elementwise AND of masks of broadcastable shapes."""
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out


def _lerp(lo: FloatArray, hi: FloatArray, w: FloatArray) -> FloatArray:
    return np.clip(lo + w * (hi - lo), np.minimum(lo, hi), np.maximum(lo, hi))
