"""The work an op does (FLOPs, bytes moved): roofline floors, extrapolation and donor scaling."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

BYTES_PER_ELEMENT = {
    "bfloat16": 2.0,
    "float16": 2.0,
    "fp8": 1.0,
    "fp8_block": 1.0,
    "int8": 1.0,
    "nvfp4": 0.5,
    "int4_wo": 0.5,
    "w4a16_mxfp4": 0.5,
    "w4a16_mxfp4_marlin": 0.5,
    "w4a8_mxfp4_mxfp8": 0.5,
}
"""Bytes per stored element of a weight / KV dtype as the tables name them (scales ignored)."""

TENSOR_RATE = {
    "bfloat16": "bfloat16",
    "float16": "bfloat16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "nvfp4": "fp4",
    "int4_wo": "bfloat16",
    "w4a16_mxfp4": "bfloat16",
    "w4a16_mxfp4_marlin": "bfloat16",
    "w4a8_mxfp4_mxfp8": "fp8",
}
"""Which datasheet tensor rate a dtype's math runs at (weight-only formats compute in bf16)."""


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def gemm_flops(m: ArrayLike, n: ArrayLike, k: ArrayLike) -> FloatArray:
    """2·m·n·k: one multiply-add per output element per reduction step."""
    return 2.0 * _f(m) * _f(n) * _f(k)


def gemm_bytes(m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str) -> FloatArray:
    """Activations (m·k) and weights (k·n) read once in ``dtype``, the bf16 output written."""
    width = BYTES_PER_ELEMENT[dtype]
    m_, n_, k_ = _f(m), _f(n), _f(k)
    return (m_ * k_ + k_ * n_) * width + m_ * n_ * 2.0


def causal_pairs(isl: ArrayLike, window: int = 0) -> FloatArray:
    """(query, key) pairs a causal prefill of ``isl`` tokens scores; a window caps each row."""
    s = _f(isl)
    if window <= 0:
        return s * (s + 1.0) / 2.0
    w = float(window)
    return np.where(s <= w, s * (s + 1.0) / 2.0, w * (w + 1.0) / 2.0 + (s - w) * w)


def context_attention_flops(
    batch: ArrayLike, isl: ArrayLike, num_heads: int, head_dim: int, window: int = 0
) -> FloatArray:
    """4·d FLOPs per scored pair per head (QKᵀ and PV), causal pairs only."""
    return 4.0 * head_dim * num_heads * _f(batch) * causal_pairs(isl, window)


def context_attention_bytes(
    batch: ArrayLike, isl: ArrayLike, num_heads: int, num_kv_heads: int, head_dim: int,
    kv_dtype: str,
) -> FloatArray:
    """Q and O in bf16, K and V in the KV dtype, each read or written once."""
    kv_width = BYTES_PER_ELEMENT[kv_dtype]
    per_token = head_dim * (2.0 * num_heads * 2.0 + 2.0 * num_kv_heads * kv_width)
    return _f(batch) * _f(isl) * per_token


def decode_attention_bytes(
    batch: ArrayLike, kv_len: ArrayLike, num_kv_heads: int, head_dim: int, kv_dtype: str,
    window: int = 0,
) -> FloatArray:
    """The K and V cache each decode row reads (window-capped)."""
    seen = _f(kv_len) if window <= 0 else np.minimum(_f(kv_len), float(window))
    return _f(batch) * seen * 2.0 * num_kv_heads * head_dim * BYTES_PER_ELEMENT[kv_dtype]


def decode_attention_flops(
    batch: ArrayLike, kv_len: ArrayLike, num_heads: int, head_dim: int, window: int = 0
) -> FloatArray:
    """4·d FLOPs per head per cached token read."""
    seen = _f(kv_len) if window <= 0 else np.minimum(_f(kv_len), float(window))
    return 4.0 * head_dim * num_heads * _f(batch) * seen


def moe_flops(
    tokens: ArrayLike, hidden: int, inter: int, topk: int, tp: int, ep: int
) -> FloatArray:
    """Gate, up and down projections (3 GEMMs) per routed token, split over tp·ep GPUs."""
    return 2.0 * 3.0 * _f(tokens) * topk * hidden * inter / (tp * ep)


def moe_bytes(
    tokens: ArrayLike, hidden: int, inter: int, topk: int, experts: int, tp: int, ep: int,
    dtype: str,
) -> FloatArray:
    """Weights of the local experts the batch touches (balanced routing) plus activations."""
    local = experts / ep
    touched = np.minimum(local, _f(tokens) * topk / ep)
    weights = touched * 3.0 * hidden * (inter / tp) * BYTES_PER_ELEMENT[dtype]
    acts = _f(tokens) * topk / ep * (2.0 * hidden + inter / tp) * 2.0
    return weights + acts


def collective_floor_bytes(message_bytes: ArrayLike, num_gpus: int) -> FloatArray:
    """Bytes each GPU must move over its links at least: (g-1)/g of the message (any
    algorithm, NVLink SHARP included, sends or receives that much)."""
    return _f(message_bytes) * (num_gpus - 1) / num_gpus


def roofline_s(flops: ArrayLike, moved_bytes: ArrayLike, peak_flops: float,
               bandwidth: float) -> FloatArray:
    """The datasheet floor: no op runs faster than its FLOPs at peak or its bytes at full
    bandwidth. Applied to answers scaled from another shape (monotone: it keeps them so)."""
    return np.maximum(_f(flops) / peak_flops, _f(moved_bytes) / bandwidth)
