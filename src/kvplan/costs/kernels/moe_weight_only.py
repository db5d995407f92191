"""Weight-only MoE kernels (w4a16: MXFP4, int4) on a GPU whose tables lack them (A100): its
own bf16 MoE time times the measured w4a16 / bf16 ratio of the nearest generation that has
both, read at the token count with the same arithmetic intensity relative to each GPU's ridge.

Why a ratio and not the bf16 table: a w4a16 kernel (vLLM's Marlin MoE on Ampere, the Triton /
Marlin MXFP4 kernels on Hopper) computes in 16-bit like the bf16 kernel, so the two differ by
the weight read (4.25 bits against 16) and the in-register dequantisation - what the donor's
pair of tables measures. Few tokens: the experts' weight read decides, the ratio is below 1;
many tokens: both are compute-bound, the ratio tends to 1 plus the dequantisation. A GPU
turns compute-bound at a token count proportional to its ridge point (bf16 FLOP/s over
bytes/s), so the donor's ratio at T is used at T x ridge(donor) / ridge(gpu)::

    t_w4a16(gpu, T) = t_bf16(gpu, T) x t_w4a16(donor, T') / t_bf16(donor, T')
    T' = T x ridge(donor) / ridge(gpu)

A100 (312 TFLOP/s, 2.039 TB/s: ridge 153 FLOP/B) from H100 (989 TFLOP/s, 3.35 TB/s: 295):
T' = 1.93 T.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.result import OpTime
from kvplan.costs.kernels.tables import peaks

WEIGHT_ONLY = ("w4a16_mxfp4", "int4_wo")
"""MoE kernel families that keep 16-bit activations (their FLOPs run at the bf16 rate)."""
DONOR = "H100-SXM-80GB"
"""The nearest generation to Ampere whose MoE tables measure the w4a16 kernels and bf16."""


def ridge_flop_per_byte(gpu: str) -> float:
    """bf16 datasheet FLOP/s over HBM bytes/s: where a kernel turns compute-bound."""
    figures = peaks(gpu)
    return float(figures["bfloat16"]) / float(figures["mem_bw"])


def token_scale(gpu: str, donor: str = DONOR) -> float:
    """T' / T: the donor's token count with the same position relative to its ridge."""
    return ridge_flop_per_byte(donor) / ridge_flop_per_byte(gpu)


def priced_by_ratio(base: OpTime, donor_w4: OpTime, donor_bf16: OpTime, word: str,
                    gpu: str) -> OpTime:
    """``base`` (this GPU's bf16 time) times the donor's measured w4a16 / bf16 ratio."""
    ratio: npt.NDArray[np.float64] = donor_w4.seconds / donor_bf16.seconds
    note = (f"{word} MoE not measured on {gpu}: its bf16 MoE x the {DONOR} {word} / bf16 "
            f"ratio at {token_scale(gpu):.3g}x the tokens (same place against each ridge)")
    return OpTime(seconds=base.seconds * ratio, status=base.status, source=base.source,
                  notes=(*base.notes, note))


def roofline_ratio(gpu: str, tokens: npt.ArrayLike, *, local_bytes: float, flops_per_token: float,
                   touched: npt.ArrayLike, hidden: int, width: float, rate: float
                   ) -> npt.NDArray[np.float64]:
    """A MoE kernel no table measures on ``gpu`` (fp8 Marlin MoE without fp8 tensor cores,
    int8 W8A8 on Ampere) over the bf16 MoE the tables measure, by the two kernels'
    datasheet rooflines: ``max(F / Rq, B_q / BW) / max(F / R16, B_16 / BW)``, F the experts'
    FLOPs at ``tokens``, B the ``touched`` share of the local experts' weights (``local_bytes``
    at 2 B a weight) at 2 or ``width`` bytes a weight plus the tokens' hidden states in and
    out, ``rate`` = Rq / R16. Memory-bound decode reads ``width`` / 2 of the bytes;
    compute-bound prefill keeps the bf16 time (``rate`` 1: Marlin multiplies in 16-bit)."""
    figures = peaks(gpu)
    r16, bw = float(figures["bfloat16"]), float(figures["mem_bw"])
    t = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
    flops = flops_per_token * t
    act = 4.0 * t * hidden
    weights = local_bytes * np.asarray(touched, dtype=np.float64)
    b16, bq = weights + act, weights * width / 2.0 + act
    out: npt.NDArray[np.float64] = (np.maximum(flops / (rate * r16), bq / bw)
                                    / np.maximum(flops / r16, b16 / bw))
    return out
