"""Weight-only MoE kernels (w4a16: MXFP4, int4; nvfp4 without fp4 tensor cores) and the other
MoE kernels a GPU's tables lack (fp8 Marlin MoE, int8 W8A8): its own measured bf16 MoE times
the ratio of the two kernels' datasheet rooflines (``roofline_ratio``).

Why not a donor GPU's measured w4a16 / bf16 ratio (the pricing before): no H100 MoE shape
measures both (w4a16 rows: gpt-oss's 2880 x 2880 only; bf16: none of them), so the ratio
divided a w4a16 time measured at the shape, fixed cost and all, by a bf16 time scaled from
another shape by its weight bytes (x0.11 for gpt-oss-20b at EP 8, fixed cost included). The
ratio then fell with tokens (3.5 -> 1.14 over 2 -> 8 tokens) and A100's w4a16 MoE with it
(306 -> 100 us over 1 -> 4 tokens, 3.5x its own bf16). The roofline ratio rises with tokens
(weight-bound: the quantized bytes, scales included, over bf16's; compute-bound: 1, the
dequantised weights multiply in 16-bit), so the derived time never falls as tokens grow.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.tables import peaks

WEIGHT_ONLY = ("w4a16_mxfp4", "int4_wo", "nvfp4")
"""MoE kernel families that keep 16-bit activations where the GPU lacks their table (their
FLOPs run at the bf16 rate; nvfp4: vLLM's Marlin MoE without fp4 tensor cores)."""


def roofline_ratio(gpu: str, tokens: npt.ArrayLike, *, local_bytes: float, flops_per_token: float,
                   touched: npt.ArrayLike, hidden: int, width: float, rate: float
                   ) -> npt.NDArray[np.float64]:
    """A MoE kernel no table measures on ``gpu`` (w4a16 and fp8 Marlin MoE, int8 W8A8 on
    Ampere) over the bf16 MoE the tables measure, by the two kernels'
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
