"""hunt15 moephys: derived MoE kernel prices obey physics - more tokens never run faster, and
no MoE op reads its weights (scales included) faster than the datasheet bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.moe import MOE_DTYPES
from kvplan.costs.kernels.tables import peaks
from kvplan.specs.hardware import gpu_catalog

GPUS = sorted(g for g in gpu_catalog() if kn.has_tables(g))
SHAPES = (  # (hidden, inter, experts, topk) of catalog MoE models
    (2880, 2880, 32, 4), (2880, 2880, 128, 4), (7168, 2048, 256, 8), (4096, 14336, 8, 2),
    (2048, 768, 128, 8), (4096, 1536, 128, 8), (2048, 1408, 64, 6), (2048, 512, 512, 10))
SPLITS = ((1, 1), (8, 1), (1, 8), (2, 1))  # (tp, ep)
STORED = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "int8": 1.0,
          "nvfp4": 4.5 / 8,  # 4 bits + an fp8 scale per 16 values
          "int4_wo": 4.125 / 8,  # 4 bits + a 16-bit scale per 128 values
          "w4a16_mxfp4": 4.25 / 8, "w4a16_mxfp4_marlin": 4.25 / 8}  # + an e8m0 scale per 32
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


def test_l40s_nvfp4_on_its_int4_marlin_table_reads_at_most_the_datasheet() -> None:
    # DeepSeek-V3's experts at EP 8, 2 tokens: 2 local experts touched x 3 x 7168 x 2048 x
    # 0.5625 B = 49,545,216 B + 2 x 8 / 8 routed rows x (2 x 7168 + 2048) x 2 B = 65,536 B
    # = 49,610,752 B at 0.864 TB/s = 57.42 us (before: 51.1 us, 0.97 TB/s at 4.5 bits).
    got = kn.moe("L40S", [2], hidden=7168, inter=2048, num_experts=256, topk=8,
                 dtype="nvfp4", ep=8)
    assert any("int4_wo" in n for n in got.notes)
    assert got.seconds[0] == pytest.approx(49_610_752 / 0.864e12, rel=1e-9)


@pytest.mark.parametrize("gpu", GPUS)
def test_no_moe_reads_its_weights_faster_than_the_datasheet(gpu: str) -> None:
    bw = float(peaks(gpu)["mem_bw"])
    for dtype in MOE_DTYPES:
        for hidden, inter, experts, topk in SHAPES:
            for tp, ep in SPLITS:
                s = kn.moe_s(gpu, TOKENS[:64], hidden=hidden, inter=inter, num_experts=experts,
                             topk=topk, dtype=dtype, tp=tp, ep=ep)
                touched = np.minimum(experts / ep, TOKENS[:64] * topk / ep)
                weights = touched * 3 * hidden * inter / tp * STORED[dtype]
                assert np.all(weights / bw <= s * (1 + 1e-9)), (dtype, hidden, inter, tp, ep)
