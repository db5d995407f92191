"""Context (prefill) and generation (decode) attention latency: vLLM's FlashAttention kernels."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import FloatArray, OpTime, Status
from kvplan.costs.kernels.slices import pick_attention
from kvplan.costs.kernels.tables import capped_at, require
from kvplan.costs.kernels.work import causal_pairs


def context_attention(gpu: str, batch: npt.ArrayLike, isl: npt.ArrayLike, *, num_heads: int,
                      num_kv_heads: int, head_dim: int, kv_dtype: str = "bfloat16",
                      window: int = 0, prefix: npt.ArrayLike = 0) -> OpTime:
    """Seconds of one layer's prefill attention for ``batch`` sequences of ``isl`` new tokens
    each over ``prefix`` cached tokens (heads as one GPU holds them, i.e. after TP).

    The tables measure prefix 0. Otherwise (and for a window the table lacks) the answer is
    read at the isl whose causal attention scores as many (query, key) pairs."""
    table = require(gpu, "attn_ctx")
    pick = pick_attention(table, num_heads=num_heads, num_kv_heads=num_kv_heads,
                          head_dim=head_dim, kv_dtype=kv_dtype, window=window, decode=False)
    new, old = np.asarray(isl, dtype=np.float64), np.asarray(prefix, dtype=np.float64)
    notes = pick.notes
    if pick.window != window or np.any(old > 0):
        pairs = causal_pairs(old + new, window) - causal_pairs(old, window)
        new = equivalent_isl(pairs, pick.window)
        if np.any(old > 0):
            notes += ("prefix priced at the isl of equal causal work (tables measure prefix 0)",)
    batch_eff = np.asarray(batch, dtype=np.float64) * pick.batch_scale
    scale: FloatArray | float = 1.0
    if pick.window > 0:  # past the measured isl a windowed prefill grows with its pairs
        last = float(table.axes[1][-1])  # (linear), not the full kernel's isl**2
        scale = np.maximum(1.0, causal_pairs(new, pick.window)
                           / causal_pairs(last, pick.window))
        new = np.minimum(new, last)
    seconds, status = lookup(table, pick.row, (batch_eff, new))
    if pick.window > 0:
        status = np.where(np.asarray(scale) > 1.0, Status.EXTRAPOLATED, status).astype(np.int8)
    kernels = tuple(table.meta["kernels"].get(pick.kv_dtype, ()))
    return OpTime(seconds=seconds * scale, status=status, source=table.source(kernels),
                  notes=notes)


def decode_attention(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, *,
                     num_heads: int, num_kv_heads: int, head_dim: int,
                     kv_dtype: str = "bfloat16", window: int = 0) -> OpTime:
    """Seconds of one layer's decode attention: ``batch`` requests, one new token each,
    attending over ``kv_len`` cached tokens (the new one included)."""
    table = require(gpu, "attn_gen")
    pick = pick_attention(table, num_heads=num_heads, num_kv_heads=num_kv_heads,
                          head_dim=head_dim, kv_dtype=kv_dtype, window=window, decode=True)
    seen = np.asarray(kv_len, dtype=np.float64)
    if pick.window != window and window > 0:
        seen = np.minimum(seen, float(window))
    batch_eff = np.asarray(batch, dtype=np.float64) * pick.batch_scale
    seconds, status = lookup(table, pick.row, (batch_eff, seen))
    if pick.window > 0:  # a measured window: past it the kernel's work stops growing
        edge, growth = window_edge(table.gpu, pick.row, pick.window)
        at_edge = lookup(table, pick.row, (batch_eff, np.full_like(seen, edge)))[0]
        seconds = np.minimum(seconds, at_edge * growth)
        if (ref := capped_at(table.gpu)) is not None:  # the same die (H200: H100's cells)
            seconds = np.minimum(seconds, decode_attention_s(
                ref, batch, kv_len, num_heads=num_heads, num_kv_heads=num_kv_heads,
                head_dim=head_dim, kv_dtype=kv_dtype, window=window))
    if window > 0:
        seconds = _window_cap(gpu, batch, kv_len, seconds, num_heads=num_heads,
                              num_kv_heads=num_kv_heads, head_dim=head_dim,
                              kv_dtype=kv_dtype, window=window)
    kernels = tuple(table.meta["kernels"].get(pick.kv_dtype, ()))
    return OpTime(seconds=seconds, status=status, source=table.source(kernels), notes=pick.notes)


def _window_cap(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, seconds: FloatArray,
                *, num_heads: int, num_kv_heads: int, head_dim: int, kv_dtype: str,
                window: int) -> FloatArray:
    """From 4 windows on a windowed decode reads at most a quarter of the full kernel's
    keys, so it is capped at the full kernel's time there; below 4 windows it reads fewer
    keys than the full kernel does at 4 windows, so it is capped at that time too: a cap
    that starts only at 4 windows made the step fall as the cache grew (H100, window 128,
    64 x 8 x 64 heads, one request: the window row's 14.29 us at 511 cached, the full
    kernel's 11.79 us at 512, until 2026-12-08)."""
    reach = np.maximum(np.asarray(kv_len, dtype=np.int64), 4 * window)
    full = decode_attention_s(gpu, batch, reach, num_heads=num_heads,
                              num_kv_heads=num_kv_heads, head_dim=head_dim, kv_dtype=kv_dtype)
    return np.minimum(seconds, full)


@lru_cache(maxsize=256)
def window_edge(gpu: str, row: int, window: int) -> tuple[float, float]:
    """(L, g) of a measured sliding-window decode slice: L the first kv_len node at least
    2 x window (the kernel visits the KV tiles the window overlaps: from there on no more),
    g the most any measured cell past L grows over its batch's cell at L (1.25x on H100,
    2.2x on B200's fp8 rows). The filled cells past the window - kv_lens the collector never
    reached - were extrapolated as if the kernel read all of them (H100's 64 x 8 x 64 slice
    of window 128 at 64 requests: 32.2 us from 256 to 32,768 cached, then 41.1 and 58.3 us
    filled, and 241.7 us read at 131,072); a lookup is capped at g x its time at L."""
    table = require(gpu, "attn_gen")
    axis = table.axes[1]
    j = min(int(np.searchsorted(axis, 2.0 * window)), axis.size - 1)
    logt, filled = table.logt[row].astype(np.float64), table.filled[row]
    past = (logt[:, j:] - logt[:, j:j + 1])[~filled[:, j:] & ~filled[:, j:j + 1]]
    return float(axis[j]), float(np.exp(past.max(initial=0.0)))


def context_attention_s(gpu: str, batch: npt.ArrayLike, isl: npt.ArrayLike, *,
                        num_heads: int, num_kv_heads: int, head_dim: int,
                        kv_dtype: str = "bfloat16", window: int = 0,
                        prefix: npt.ArrayLike = 0) -> FloatArray:
    """``context_attention(...).seconds``."""
    return context_attention(gpu, batch, isl, num_heads=num_heads, num_kv_heads=num_kv_heads,
                             head_dim=head_dim, kv_dtype=kv_dtype, window=window,
                             prefix=prefix).seconds


def decode_attention_s(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, *,
                       num_heads: int, num_kv_heads: int, head_dim: int,
                       kv_dtype: str = "bfloat16", window: int = 0) -> FloatArray:
    """``decode_attention(...).seconds``."""
    return decode_attention(gpu, batch, kv_len, num_heads=num_heads, num_kv_heads=num_kv_heads,
                            head_dim=head_dim, kv_dtype=kv_dtype, window=window).seconds


def equivalent_isl(pairs: npt.ArrayLike, window: int) -> FloatArray:
    """The prompt length whose causal attention (within ``window``; 0: full) scores
    ``pairs`` (query, key) pairs: the inverse of ``work.causal_pairs``."""
    p = np.maximum(np.asarray(pairs, dtype=np.float64), 0.0)
    full = (np.sqrt(8.0 * p + 1.0) - 1.0) / 2.0
    if window <= 0:
        return full
    w = float(window)
    cap = w * (w + 1.0) / 2.0
    return np.where(p <= cap, full, w + (p - cap) / w)
