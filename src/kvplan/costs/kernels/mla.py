"""DeepSeek-V3-style MLA attention blocks (prefill and decode) as vLLM runs them, measured
whole: q/kv down- and up-projections, the attention kernel and o_proj in one latency. A GPU
with no MLA table (A100) borrows the nearest one's, scaled by their measured attention ratio."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.attention import context_attention_s, decode_attention_s
from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import FloatArray, OpTime, Status
from kvplan.costs.kernels.tables import (
    Table,
    measured_gpus,
    peaks,
    require,
    resolve_gpu,
    table,
)

RATIO_HEAD_DIM = 128
"""Head size of the attention kernels whose GPU-to-GPU ratio stands in for a missing MLA
table (the tables' common head size)."""
RATIO_AT = {"mla_gen": (64, 8192), "mla_ctx": (1, 8192)}
"""(batch, length) the ratio is read at: decode where attention streams the cache
(bandwidth-bound), prefill where it is compute-bound. One ratio per phase keeps the donor's
measured shape of the curve (more work is never faster)."""


def mla_context(gpu: str, batch: npt.ArrayLike, isl: npt.ArrayLike, *, num_heads: int,
                kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> OpTime:
    """Seconds of one MLA layer's prefill block for ``batch`` prompts of ``isl`` tokens with
    ``num_heads`` heads on this GPU (DeepSeek-V3: 128 / TP). Includes the block's GEMMs:
    do not price q_a/kv_a/q_b/kv_b/o_proj again."""
    if (donor := _donor(gpu, "mla_ctx")) is not None:
        return _by_ratio(gpu, donor, batch, isl, num_heads, kv_dtype, gemm_dtype, decode=False)
    return _mla(require(gpu, "mla_ctx"), batch, isl, num_heads, kv_dtype, gemm_dtype)


def mla_decode(gpu: str, batch: npt.ArrayLike, kv_len: npt.ArrayLike, *, num_heads: int,
               kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16") -> OpTime:
    """Seconds of one MLA layer's decode block: ``batch`` requests, one token each, over
    ``kv_len`` cached tokens. Includes the block's GEMMs (see ``mla_context``)."""
    if (donor := _donor(gpu, "mla_gen")) is not None:
        return _by_ratio(gpu, donor, batch, kv_len, num_heads, kv_dtype, gemm_dtype, decode=True)
    return _mla(require(gpu, "mla_gen"), batch, kv_len, num_heads, kv_dtype, gemm_dtype)


def mla_donor(gpu: str) -> str | None:
    """The GPU whose MLA tables price ``gpu``'s MLA blocks (by ratio), or None when ``gpu``
    has its own."""
    return _donor(gpu, "mla_gen")


def _donor(gpu: str, family: str) -> str | None:
    """None where ``gpu`` has the MLA table; else the measured GPU nearest on the datasheet
    (bf16 FLOP/s and bytes/s, log distance) that has it (A100: no MLA table is bundled)."""
    own = resolve_gpu(gpu)
    if table(own, family) is not None:
        return None
    have = [g for g in measured_gpus() if table(g, family) is not None]
    mine = peaks(own)

    def gap(g: str) -> float:
        theirs = peaks(g)
        return sum(abs(math.log(mine[k] / theirs[k])) for k in ("bfloat16", "mem_bw"))

    return min(have, key=gap)


def _by_ratio(gpu: str, donor: str, batch: npt.ArrayLike, length: npt.ArrayLike,
              num_heads: int, kv_dtype: str, gemm_dtype: str, *, decode: bool) -> OpTime:
    """The donor's measured MLA block x (this GPU's / the donor's measured attention at one
    reference shape, ``RATIO_AT``): decode as MQA (one shared latent, bandwidth-bound),
    prefill as MHA (compute-bound), as vLLM runs MLA's two paths::

        t(gpu) = t_mla(donor) x t_attn(gpu, ref) / t_attn(donor, ref)
    """
    family = "mla_gen" if decode else "mla_ctx"
    base = _mla(require(donor, family), batch, length, num_heads, kv_dtype, gemm_dtype)
    ratio = mla_ratio(gpu, donor, num_heads, decode=decode)
    note = (f"{resolve_gpu(gpu)} has no measured MLA table: {donor}'s MLA block x "
            f"{ratio:.3g}, the two GPUs' measured {'decode' if decode else 'prefill'} "
            "attention ratio")
    status = np.maximum(base.status, Status.EXTRAPOLATED).astype(base.status.dtype)
    return OpTime(seconds=base.seconds * ratio, status=status, source=base.source,
                  notes=(*base.notes, note))


def mla_ratio(gpu: str, donor: str, num_heads: int, *, decode: bool) -> float:
    """t_attn(gpu) / t_attn(donor) at ``RATIO_AT`` (see ``_by_ratio``)."""
    attend = decode_attention_s if decode else context_attention_s
    batch, length = RATIO_AT["mla_gen" if decode else "mla_ctx"]
    kv_heads = 1 if decode else num_heads
    own, theirs = (float(np.ravel(attend(g, batch, length, num_heads=num_heads,
                                         num_kv_heads=kv_heads, head_dim=RATIO_HEAD_DIM))[0])
                   for g in (gpu, donor))
    return own / theirs


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
