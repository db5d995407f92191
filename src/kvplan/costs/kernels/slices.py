"""Choosing the measured attention slice for a layer's (heads, KV heads, head size, KV dtype,
window), and how to scale from it when the exact shape was not measured."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.costs.kernels.tables import Table


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionSlice:
    """The slice a lookup reads and the factor its batch axis is scaled by."""

    row: int
    window: int
    """The slice's window (0: full attention); differs from the asked one when not measured."""
    batch_scale: float
    """Attention kernels tile batch x heads alike, so h heads of equal per-head work cost
    what batch x h/h_ref rows cost on the measured h_ref (and likewise for head size)."""
    kv_dtype: str
    notes: tuple[str, ...]


def pick_attention(table: Table, *, num_heads: int, num_kv_heads: int, head_dim: int,
                   kv_dtype: str, window: int, decode: bool) -> AttentionSlice:
    """The nearest measured slice; notes say every way it differs from the asked shape."""
    notes: list[str] = []
    kv_word = _kv_word(table, kv_dtype, notes)
    rows = np.flatnonzero(table.column("kv_dtype") == table.code("kv_dtype", kv_word))
    rows, dim_scale = _head_dim(table, rows, head_dim, notes)
    rows, slice_window = _window(table, rows, window, notes)
    row, head_scale = _heads(table, rows, num_heads, num_kv_heads, decode, notes)
    return AttentionSlice(row=row, window=slice_window, batch_scale=dim_scale * head_scale,
                          kv_dtype=kv_word, notes=tuple(notes))


def _kv_word(table: Table, kv_dtype: str, notes: list[str]) -> str:
    want = {"auto": "bfloat16", "float16": "bfloat16", "half": "bfloat16", "bf16": "bfloat16",
            "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(kv_dtype.lower(), kv_dtype.lower())
    if table.code("kv_dtype", want) in set(table.column("kv_dtype").tolist()):
        return want
    notes.append(f"KV dtype {kv_dtype} not measured on {table.gpu}: priced as bfloat16")
    return "bfloat16"


def _head_dim(table: Table, rows: np.ndarray, head_dim: int,
              notes: list[str]) -> tuple[np.ndarray, float]:
    """Exact head size, else the next measured one (kernels pad the head to their tile),
    else the largest scaled linearly."""
    dims = sorted(set(table.column("head_dim")[rows].tolist()))
    larger = [d for d in dims if d >= head_dim]
    chosen = larger[0] if larger else dims[-1]
    scale = 1.0 if larger else head_dim / chosen
    if chosen != head_dim:
        how = "padded to" if larger else f"scaled x{scale:.3g} from"
        notes.append(f"head size {head_dim} {how} measured {chosen}")
    return rows[table.column("head_dim")[rows] == chosen], scale


def _window(table: Table, rows: np.ndarray, window: int,
            notes: list[str]) -> tuple[np.ndarray, int]:
    windows = set(table.column("window")[rows].tolist())
    if window in windows:
        return rows[table.column("window")[rows] == window], window
    notes.append(f"window {window} not measured: priced on full attention over the window's "
                 "work")
    return rows[table.column("window")[rows] == 0], 0


def _heads(table: Table, rows: np.ndarray, num_heads: int, num_kv_heads: int, decode: bool,
           notes: list[str]) -> tuple[int, float]:
    """Exact (heads, KV heads); else the same group size nearest in heads; else the nearest
    group size. Scale: heads (prefill, FLOPs) or KV heads (decode, bytes) over the slice's."""
    hs, kvs = table.column("num_heads")[rows], table.column("num_kv_heads")[rows]
    ratio = num_heads / max(num_kv_heads, 1)
    cost = (np.abs(np.log(hs / kvs) - np.log(ratio)) * 100.0
            + np.abs(np.log(hs) - np.log(num_heads)))
    best = int(np.argmin(cost))
    h_ref, kv_ref = int(hs[best]), int(kvs[best])
    scale = (num_kv_heads / kv_ref) if decode else (num_heads / h_ref)
    if (h_ref, kv_ref) != (num_heads, num_kv_heads):
        notes.append(f"heads {num_heads}/{num_kv_heads} priced as measured {h_ref}/{kv_ref} "
                     f"with batch x{scale:.3g}")
    return int(rows[best]), scale


def kv_table(precision: str, width: int, gpu: str | None = None) -> tuple[str, float]:
    """(measured KV dtype table, cached bytes per token over that table's) for a cache
    precision (``KvPrecision.name``) and head width: the tables hold bfloat16 and fp8 caches
    only, so nvfp4 (72 B per 128 values) reads the fp8 line at 0.5625x its per-token bytes,
    float32 the bfloat16 line at 2x, a per-token-head format the fp8 line at 132/128.
    ``gpu`` whose attention tables lack fp8 (A100): 8-bit caches read the bf16 line at their
    own bytes (fp8 0.5x), not the bf16 line at 1x that the slice lookup falls back to."""
    from kvplan.specs.kv_precision import PRECISIONS

    p = PRECISIONS.get(precision)
    if p is None:  # fp8_ds_mla: the fp8 MLA line
        return ("fp8" if precision.startswith("fp8") else "bfloat16"), 1.0
    word, per_value = ("fp8", 1) if p.value_bits <= 8 else ("bfloat16", 2)
    if word == "fp8" and gpu is not None and not _measures_kv(gpu, word):
        word, per_value = "bfloat16", 2
    return word, p.vector_bytes(width) / (width * per_value)


def _measures_kv(gpu: str, word: str) -> bool:
    """Whether ``gpu``'s decode attention table holds a ``word`` KV cache."""
    from kvplan.costs.kernels.tables import require

    table = require(gpu, "attn_gen")
    return bool(table.code("kv_dtype", word) in set(table.column("kv_dtype").tolist()))
