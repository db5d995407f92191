"""DeepSeek-V3-style MLA attention blocks (prefill and decode) as vLLM runs them, measured
whole: q/kv down- and up-projections, the attention kernel and o_proj in one latency."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import FloatArray, OpTime
from kvplan.costs.kernels.tables import Table, require


def mla_context(gpu: str, batch: npt.ArrayLike, isl: npt.ArrayLike, *, num_heads: int,
                kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> OpTime:
    """Seconds of one MLA layer's prefill block for ``batch`` prompts of ``isl`` tokens with
    ``num_heads`` heads on this GPU (DeepSeek-V3: 128 / TP). Includes the block's GEMMs:
    do not price q_a/kv_a/q_b/kv_b/o_proj again."""
    return _mla(require(gpu, "mla_ctx"), batch, isl, num_heads, kv_dtype, gemm_dtype)


def mla_decode(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, *, num_heads: int,
               kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> OpTime:
    """Seconds of one MLA layer's decode block: ``batch`` requests, one token each, over
    ``kv_len`` cached tokens. Includes the block's GEMMs (see ``mla_context``)."""
    return _mla(require(gpu, "mla_gen"), batch, kv_len, num_heads, kv_dtype, gemm_dtype)


def mla_context_s(gpu: str, batch: npt.ArrayLike, isl: npt.ArrayLike, *, num_heads: int,
                  kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> FloatArray:
    """``mla_context(...).seconds``."""
    return mla_context(gpu, batch, isl, num_heads=num_heads, kv_dtype=kv_dtype,
                       gemm_dtype=gemm_dtype).seconds


def mla_decode_s(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, *, num_heads: int,
                 kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> FloatArray:
    """``mla_decode(...).seconds``."""
    return mla_decode(gpu, batch, kv_len, num_heads=num_heads, kv_dtype=kv_dtype,
                      gemm_dtype=gemm_dtype).seconds


def _mla(table: Table, batch: npt.ArrayLike, length: npt.ArrayLike, num_heads: int,
         kv_dtype: str, gemm_dtype: str) -> OpTime:
    notes: list[str] = []
    kv = _word(table, "kv_dtype", kv_dtype, notes)
    gemm = _word(table, "gemm_type", gemm_dtype, notes)
    rows = np.flatnonzero((table.column("kv_dtype") == table.code("kv_dtype", kv))
                          & (table.column("gemm_type") == table.code("gemm_type", gemm)))
    heads = table.column("num_heads")[rows]
    best = int(np.argmin(np.abs(np.log(heads / num_heads))))
    scale = num_heads / int(heads[best])
    if scale != 1.0:
        notes.append(f"{num_heads} heads priced as measured {int(heads[best])} with batch "
                     f"x{scale:.3g}")
    seconds, status = lookup(table, int(rows[best]),
                             (np.asarray(batch, dtype=np.float64) * scale, length))
    source = table.source(tuple(table.meta["kernels"].get(gemm, ())))
    return OpTime(seconds=seconds, status=status, source=source, notes=tuple(notes))


def _word(table: Table, column: str, asked: str, notes: list[str]) -> str:
    aliases = {"auto": "bfloat16", "bf16": "bfloat16", "float16": "bfloat16",
               "fp8_e4m3": "fp8"}
    if column == "gemm_type":  # MLA checkpoints' fp8 is DeepSeek's block-scaled fp8
        aliases.update({"fp8": "fp8_block", "fp4": "nvfp4"})
    want = aliases.get(asked.lower(), asked.lower())
    if table.code(column, want) in set(table.column(column).tolist()):
        return want
    notes.append(f"MLA {column} {asked} not measured on {table.gpu}: priced as bfloat16")
    return "bfloat16"
