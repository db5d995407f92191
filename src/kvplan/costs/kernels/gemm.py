"""GEMM latency by (m, n, k, dtype): vLLM's linear-layer kernels as measured per GPU."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.grid import lookup, seconds
from kvplan.costs.kernels.result import FloatArray, OpTime
from kvplan.costs.kernels.tables import Table, capped_at, peaks, require
from kvplan.errors import UnknownNameError

GEMM_DTYPES = ("bfloat16", "float16", "fp8", "fp8_block", "nvfp4", "int8")
"""bfloat16/float16 (unquantized), fp8 (per-tensor scales), fp8_block (128x128 block scales,
DeepSeek-style), nvfp4 (Blackwell only), int8 (W8A8: int8 weights and activations; no table
measures it: read off the per-tensor fp8 table where the datasheet int8 rate is the fp8
rate, else derived from bfloat16, ``kernels.quantized``)."""
_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp4": "nvfp4",
            "fp8_e4m3": "fp8"}


def gemm(gpu: str, m: npt.ArrayLike, n: npt.ArrayLike, k: npt.ArrayLike,
         dtype: str = "bfloat16") -> OpTime:
    """Seconds of one ``(m x k) @ (k x n)`` GEMM (m = tokens, n = output features, k = input
    features; all broadcast), each element's Status, and the table it stands on."""
    table = require(gpu, "gemm")
    word, notes = gemm_slice(table, dtype)
    t, status = lookup(table, _row(table, word), (m, n, k))
    kernels = tuple(table.meta["kernels"].get(word, ()))
    return OpTime(seconds=t, status=status, source=table.source(kernels), notes=notes)


def _row(table: Table, word: str) -> int:
    """The table row of measured dtype ``word``."""
    return int((table.column("dtype") == table.code("dtype", word)).argmax())


def gemm_s(gpu: str, m: npt.ArrayLike, n: npt.ArrayLike, k: npt.ArrayLike,
           dtype: str = "bfloat16") -> FloatArray:
    """``gemm(...).seconds`` (the same floats, without the per-point Status)."""
    table = require(gpu, "gemm")
    word, _ = gemm_slice(table, dtype)
    return seconds(table, _row(table, word), (m, n, k))


def gemm_slice(table: Table, dtype: str) -> tuple[str, tuple[str, ...]]:
    """The measured dtype that prices ``dtype`` on this GPU, and what was assumed."""
    want = _ALIASES.get(dtype.lower(), dtype.lower())
    if want not in GEMM_DTYPES:
        raise UnknownNameError(f"unknown GEMM dtype {dtype!r}: choose one of "
                               f"{', '.join(GEMM_DTYPES)}")
    have = set(table.vocab["dtype"][c] for c in table.column("dtype"))
    if want == "float16":
        return "bfloat16", ("float16 priced on the bfloat16 table (same tensor-core rate)",)
    if want in have:
        return want, ()
    if want == "int8":
        return _int8_slice(table, have)
    rate = "fp4" if want == "nvfp4" else "fp8"
    if not peaks(table.gpu).get(rate):
        return "bfloat16", (f"{table.gpu} has no {rate} tensor cores: {want} priced as "
                            "bfloat16 (vLLM runs such checkpoints weight-only)",)
    if want == "fp8_block" and "fp8" in have:
        return "fp8", ("fp8_block not measured: priced on the per-tensor fp8 table",)
    return "bfloat16", (f"{want} not measured on {table.gpu}: priced as bfloat16",)


def _int8_slice(table: Table, have: set[str]) -> tuple[str, tuple[str, ...]]:
    """int8 W8A8 (vLLM's CUTLASS ``scaled_mm`` on int8 tensor cores): the per-tensor fp8
    CUTLASS table where the datasheet int8 rate equals the fp8 rate (the same kernel family
    at the same rate and operand bytes), else the bfloat16 table that ``kernels.quantized``
    scales to the int8 rate and bytes."""
    fp8 = float(peaks(table.gpu).get("fp8") or 0.0)
    if "fp8" in have and fp8 > 0 and int8_rate(table.gpu) == fp8:
        return "fp8", (f"int8 W8A8 priced on {table.gpu}'s per-tensor fp8 table (CUTLASS "
                       "scaled_mm: the same datasheet rate and operand bytes)",)
    return "bfloat16", (f"int8 W8A8 on {table.gpu}: its bfloat16 GEMMs at int8 bytes and "
                        "the datasheet int8 / bf16 rate",)


@lru_cache(maxsize=64)
def int8_rate(gpu: str) -> float:
    """The GPU's datasheet dense int8 tensor-core rate, ops/s (its 16-bit rate if none)."""
    from kvplan.costs.kernels.tables import resolve_gpu
    from kvplan.specs.hardware import load_gpu

    return load_gpu(resolve_gpu(gpu)).peak_flops_for("int8")


def served_gemm_s(gpu: str, m: npt.NDArray[np.int64], n: int, k: int, dtype: str) -> FloatArray:
    """GEMM seconds as a served step runs them. Block-scaled fp8 tables carry a constant floor
    per call (55 us on H100/H200, 154 us on B200 at m = 1, against 11 us for the per-tensor fp8
    kernel on the same shape): host-side time of the measuring harness that a CUDA-graph
    replay does not pay. Block fp8 is priced at its measured time less that excess floor,
    never below the per-tensor fp8 kernel's time on the same shape, and on a GPU whose cells
    were capped at the same die's (H200 at H100) never above that die's served time (each
    GPU's own floor moved H200's DeepSeek-V3 q_b_proj at m = 8 to 4% above H100's).

    Nor above the bf16 GEMM of the same shape: block fp8 reads about half its weight bytes
    and multiplies at the fp8 tensor-core rate (twice bf16's; where a GPU has none, the slice
    is bf16 already). The m = 1 excess leaves a floor where a larger m selects another
    kernel: H100 at n = 6,144, k = 4,096 read 80 us flat from m = 32 to 512 (38 us served)
    beside 21-36 us bf16, so Qwen3-8B-FP8's decode step at 64 requests was priced above
    the bf16 model's. The same bound as ``kernels.moe``'s per-tensor fp8 experts."""
    t = gemm_s(gpu, m, n, k, dtype)
    if dtype != "fp8_block":
        return t
    out: FloatArray = np.maximum(gemm_s(gpu, m, n, k, "fp8"), t - _block_excess(gpu, n, k))
    out = np.minimum(out, gemm_s(gpu, m, n, k, "bfloat16"))
    if (ref := capped_at(gpu)) is not None:
        out = np.minimum(out, served_gemm_s(ref, m, n, k, dtype))
    return out


@lru_cache(maxsize=1024)
def _block_excess(gpu: str, n: int, k: int) -> float:
    """The block-scaled kernel's excess floor at m = 1 over per-tensor fp8 (at least 0), once
    per shape: a model's projections ask it for every batch size of the decode line."""
    one = np.array([1])
    excess = float(gemm_s(gpu, one, n, k, "fp8_block")[0]) - float(gemm_s(gpu, one, n, k,
                                                                           "fp8")[0])
    return max(excess, 0.0)
