"""Hunt 14, MLA models (DeepSeek-V2-Lite, DeepSeek-V3 and its R1 / V3.x checkpoints):
regressions found checking kvplan against vLLM 0.11's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.gemm import served_gemm_s
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import MLA_GEMM, measured_step
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def _gemm(gpu: str, m: int, n: int, k: int) -> float:
    return float(served_gemm_s(gpu, np.array([m]), n, k, MLA_GEMM)[0])


def test_mla_prefill_core_keeps_the_new_tokens_kv_b_up_projection() -> None:
    # DeepSeek-V3 TP8 on H100 (16 heads a GPU), one 4,096-token prompt. The measured MLA
    # prefill block (aiconfigurator's DeepseekV2MLAAttention forward) runs q_a/kv_a, q_b,
    # kv_b (vLLM's _forward_prefill up-projects the new tokens' latent: m=4096 n=16x256=4096
    # k=512), the attention kernel and o_proj. The step adds q_a/kv_a, q_b and o_proj from
    # the GEMM tables, and kv_b only over a prefill's *cached* context, so the core must keep
    # the new tokens' kv_b: per layer, core = block - q_a - kv_a - q_b - o_proj. kvplan took
    # kv_b out too, so the new tokens' up-projection (61 x 0.03 ms at 4,096 tokens) was
    # priced nowhere.
    gpu, s = "H100", 4096
    timer = StepCostModel(load_model("deepseek-ai/DeepSeek-V3"), load_gpu(gpu),
                          EngineConfig(tensor_parallel_size=8))
    assert timer.ops is not None
    ms = measured_step(timer.ops, kn.resolve_gpu(gpu), timer.gemm_dtype, "bfloat16", 64, s)
    assert ms.full is not None
    block = float(kn.mla_context_s(gpu, 1, s, num_heads=16, kv_dtype="bfloat16",
                                   gemm_dtype=MLA_GEMM)[()].sum())
    per_token = (_gemm(gpu, s, 1536, 7168) + _gemm(gpu, s, 576, 7168)
                 + _gemm(gpu, s, 3072, 1536) + _gemm(gpu, s, 7168, 2048))
    kv_b = _gemm(gpu, s, 4096, 512)
    assert kv_b > 0
    pairs = s * (s + 1) // 2
    assert ms.full.per_pair_s * pairs == pytest.approx(61 * (block - per_token), rel=1e-9)
