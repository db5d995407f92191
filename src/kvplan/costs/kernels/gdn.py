"""Gated DeltaNet (linear attention) latency per layer: vLLM's GDN kernels as one layer of
Qwen3-Next / Qwen3.5 runs them (aiconfigurator's ``gdn_perf``, both kernels of a phase summed):

    prefill  causal_conv1d_fn + the chunked delta rule   (batch sequences of seq_len tokens)
    decode   causal_conv1d_update + the recurrent delta rule   (batch requests, one token)

Slices are per-GPU head counts (after TP) and head sizes; a shape the tables lack is not
guessed (``gdn_slice`` answers None and the step model keeps its roofline)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import OpTime
from kvplan.costs.kernels.tables import Table, resolve_gpu, table


def gdn_slice(gpu: str, phase: str, *, key_heads: int, value_heads: int, key_dim: int,
              value_dim: int) -> tuple[Table, int] | None:
    """(table, slice row) of ``phase`` ('ctx' or 'gen') measured at exactly this per-GPU
    shape on ``gpu``; None where the GPU has no GDN table or not this shape."""
    found = table(resolve_gpu(gpu), f"gdn_{phase}")
    if found is None:
        return None
    want = (key_heads, value_heads, key_dim, value_dim)
    names = ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim")
    match = np.ones(len(found.keys), dtype=bool)
    for name, value in zip(names, want, strict=True):
        match &= found.column(name) == value
    rows = np.flatnonzero(match)
    return (found, int(rows[0])) if len(rows) else None


def gdn_prefill(gpu: str, batch: npt.ArrayLike, seq_len: npt.ArrayLike, *, key_heads: int,
                value_heads: int, key_dim: int, value_dim: int) -> OpTime | None:
    """Seconds of one GDN layer prefilling ``batch`` sequences of ``seq_len`` new tokens."""
    return _lookup(gpu, "ctx", (batch, seq_len), (key_heads, value_heads, key_dim, value_dim))


def gdn_decode(gpu: str, batch: npt.ArrayLike, *, key_heads: int, value_heads: int,
               key_dim: int, value_dim: int) -> OpTime | None:
    """Seconds of one GDN layer's decode step for ``batch`` requests."""
    return _lookup(gpu, "gen", (batch,), (key_heads, value_heads, key_dim, value_dim))


def _lookup(gpu: str, phase: str, coords: tuple[npt.ArrayLike, ...],
            shape: tuple[int, int, int, int]) -> OpTime | None:
    k, v, kd, vd = shape
    pick = gdn_slice(gpu, phase, key_heads=k, value_heads=v, key_dim=kd, value_dim=vd)
    if pick is None:
        return None
    t, row = pick
    seconds, status = lookup(t, row, tuple(np.asarray(c, dtype=np.float64) for c in coords))
    return OpTime(seconds=seconds, status=status,
                  source=t.source(tuple(t.meta.get("kernels", ()))), notes=())
