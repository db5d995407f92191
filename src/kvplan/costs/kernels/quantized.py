"""Dense GEMMs of quantized weights that vLLM runs on a kernel no table measures, priced from
the GPU's own measured 16-bit GEMM and its datasheet rates.

Weight-only kernels (vLLM 0.11's Marlin / Machete: AWQ, GPTQ, compressed-tensors wNa16; fp8
on GPUs without fp8 tensor cores, ``Fp8LinearMethod`` with ``use_marlin``; nvfp4 without fp4
tensor cores, ``ModelOptNvFp4LinearMethod``'s Marlin backend) read the quantized weight plus
its scales, dequantize in registers and multiply on the 16-bit tensor cores. int8 W8A8
(``CompressedTensorsW8A8Int8``: CUTLASS ``scaled_mm`` on int8 tensor cores) reads 1-byte
weights and activations and multiplies at the datasheet int8 rate. An ``(m x k) @ (k x n)``
GEMM whose measured 16-bit time is ``t16(m)`` is priced at that time times the ratio of the
two kernels' rooflines on the datasheet (``R`` tensor-core rates, ``BW`` memory bandwidth)::

    t(m) = t16(m) x max(F / Rq, B_q / BW) / max(F / R16, B_16 / BW)

    F = 2mnk,  B_16 = 2nk + 2m(k + n),  B_q = W_q + m(a k + 2n)

``W_q``: the quantized weight's bytes with its scales (and zeros); ``a``: activation bytes
(2; 1 for int8). A memory-bound 16-bit GEMM (decode) thus runs at the quantized bytes, a
compute-bound one (prefill) at the 16-bit time (``Rq = R16``: weight-only kernels multiply
in 16-bit) or at the int8 rate (A100: 624 / 312 TOPS, twice as fast); the measured kernel's
efficiency carries over and the time is never above ``t16``. No factor is fitted: byte
counts, the measured 16-bit table and datasheet rates. Where a GPU measures the per-tensor
fp8 CUTLASS kernel and its datasheet int8 rate equals its fp8 rate (Hopper, Ada, Blackwell),
int8 W8A8 is read off that table instead (``kernels.gemm.gemm_slice``): the same kernel
family at the same rate and operand bytes.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.gemm import gemm_s, gemm_slice, int8_rate, served_gemm_s
from kvplan.costs.kernels.result import FloatArray
from kvplan.costs.kernels.tables import peaks, require


def quantized_gemm_s(gpu: str, m: npt.ArrayLike, n: int, k: int, dtype: str,
                     weight_bytes: int = 0) -> FloatArray:
    """``served_gemm_s``, except a GEMM of ``weight_bytes`` quantized weight bytes (0: a
    16-bit weight) that vLLM runs weight-only, or int8 W8A8 without a same-rate fp8 table:
    priced by the formula above."""
    how = _derivation(gpu, dtype, weight_bytes)
    rows = np.asarray(m, dtype=np.int64)
    if how is None:
        return served_gemm_s(gpu, rows, n, k, dtype)
    rate, act = how
    return derived_gemm_s(gpu, rows, n, k, weight_bytes or n * k, rate=rate, act_bytes=act)


def table_gemm_s(gpu: str, m: npt.ArrayLike, n: int, k: int, dtype: str,
                 weight_bytes: int = 0) -> FloatArray:
    """``gemm_s`` (the table as measured, without ``served_gemm_s``'s block-fp8 floor
    adjustment: MLA's kv_b_proj per cached token is read so), or the formula where
    ``quantized_gemm_s`` derives the GEMM."""
    rows = np.asarray(m, dtype=np.int64)
    if _derivation(gpu, dtype, weight_bytes) is None:
        return gemm_s(gpu, rows, n, k, dtype)
    return quantized_gemm_s(gpu, rows, n, k, dtype, weight_bytes)


def _derivation(gpu: str, dtype: str, weight_bytes: int) -> tuple[float, int] | None:
    """(16-bit / quantized compute rate, activation bytes) where the formula prices the
    GEMM; None where a measured table does (16-bit weights, or a kernel the GPU measures)."""
    word, _ = gemm_slice(require(gpu, "gemm"), dtype)
    if word != "bfloat16" or (weight_bytes <= 0 and dtype.lower() != "int8"):
        return None
    if dtype.lower() == "int8":
        return _int8_speedup(gpu), 1
    return 1.0, 2


@cache
def _int8_speedup(gpu: str) -> float:
    """Datasheet dense int8 over bf16 tensor-core rate (A100: 624 / 312 = 2)."""
    return max(1.0, int8_rate(gpu) / float(peaks(gpu)["bfloat16"]))


def derived_gemm_s(gpu: str, m: npt.NDArray[np.int64], n: int, k: int, weight_bytes: int, *,
                   rate: float = 1.0, act_bytes: int = 2) -> FloatArray:
    """The formula of the module docstring at rows ``m`` (``rate``: Rq / R16)."""
    t16 = served_gemm_s(gpu, m, n, k, "bfloat16")
    peak = peaks(gpu)
    r16, bw = float(peak["bfloat16"]), float(peak["mem_bw"])
    rows = m.astype(np.float64)
    flops = 2.0 * rows * n * k
    b16 = 2.0 * n * k + 2.0 * rows * (k + n)
    bq = weight_bytes + rows * (act_bytes * k + 2.0 * n)
    ratio = np.maximum(flops / (rate * r16), bq / bw) / np.maximum(flops / r16, b16 / bw)
    out: FloatArray = t16 * ratio
    return out


def basis_note(gpu: str, dtype: str, weight_bytes: int) -> str:
    """``kvplan latency --explain``'s words where ``quantized_gemm_s`` derives the GEMMs."""
    how = _derivation(gpu, dtype, weight_bytes)
    if how is None and dtype.lower() == "int8":
        return ("; int8 W8A8 GEMMs on its per-tensor fp8 table (CUTLASS scaled_mm at the same "
                "datasheet rate and operand bytes)")
    if how is None:
        return ""
    kind = "int8 W8A8" if how[1] == 1 else "weight-only (Marlin)"
    return (f"; {kind} GEMMs: its bfloat16 GEMMs x the datasheet roofline ratio at the "
            "quantized bytes")
