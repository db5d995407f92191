"""hunt15 moephys: derived MoE kernel prices obey physics - more tokens never run faster, and
no MoE op reads its weights (scales included) faster than the datasheet bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.moe import MOE_DTYPES
from kvplan.specs.hardware import gpu_catalog

GPUS = sorted(g for g in gpu_catalog() if kn.has_tables(g))
SHAPES = (  # (hidden, inter, experts, topk) of catalog MoE models
    (2880, 2880, 32, 4), (2880, 2880, 128, 4), (7168, 2048, 256, 8), (4096, 14336, 8, 2),
    (2048, 768, 128, 8), (4096, 1536, 128, 8), (2048, 1408, 64, 6), (2048, 512, 512, 10))
SPLITS = ((1, 1), (8, 1), (1, 8), (2, 1))  # (tp, ep)
TOKENS = np.arange(1, 4097, dtype=np.float64)


def _int8_on_bf16_table(gpu: str) -> bool:
    """int8 W8A8 priced by the roofline ratio at twice bf16's rate (A100): not covered."""
    return any("int8 W8A8 experts:" in n
               for n in kn.moe(gpu, [1], hidden=2048, inter=768, num_experts=128, topk=8,
                               dtype="int8").notes)


def test_a100_gpt_oss_20b_w4a16_ep8_no_longer_falls_with_tokens() -> None:
    # before: 306 / 175 / 100 us at 1 / 2 / 4 tokens (H100's w4a16 row at the shape over its
    # bf16 row scaled x0.11 from another shape). Now A100's bf16 MoE (88.07 us, flat) x the
    # roofline ratio: 4 local experts x 3 x 2880 x 2880 x 2 B = 199,065,600 B, touched
    # t x 4 / 32; one token: 24,883,200 B at bf16, 6,609,600 B at 4.25 bits, + 4 x 2880 =
    # 11,520 B of hidden states; memory-bound (24.9 MFLOP / 312 TFLOP/s = 0.08 us):
    # ratio = 6,621,120 / 24,894,720 = 0.26597 (the same at 2 and 4 tokens: both linear).
    t = [1, 2, 4]
    shape = {"hidden": 2880, "inter": 2880, "num_experts": 32, "topk": 4, "ep": 8}
    w4 = kn.moe("A100-80GB-SXM", t, dtype="w4a16_mxfp4", **shape).seconds
    bf16 = kn.moe("A100-80GB-SXM", t, dtype="bfloat16", **shape).seconds
    assert bf16 * 1e6 == pytest.approx([88.07] * 3, abs=0.01)
    assert w4 == pytest.approx(bf16 * 6_621_120 / 24_894_720, rel=1e-9)
    assert w4 * 1e6 == pytest.approx([23.42] * 3, abs=0.01)


@pytest.mark.parametrize("gpu", GPUS)
def test_more_tokens_never_run_a_moe_faster(gpu: str) -> None:
    for dtype in MOE_DTYPES:
        if dtype == "int8" and _int8_on_bf16_table(gpu):
            continue
        for hidden, inter, experts, topk in SHAPES:
            for tp, ep in SPLITS:
                s = kn.moe_s(gpu, TOKENS, hidden=hidden, inter=inter, num_experts=experts,
                             topk=topk, dtype=dtype, tp=tp, ep=ep)
                drop = np.flatnonzero(np.diff(s) < -1e-12 * s[1:])
                assert drop.size == 0, (dtype, hidden, inter, experts, topk, tp, ep,
                                        TOKENS[drop[:1]])
