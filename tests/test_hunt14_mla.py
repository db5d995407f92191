"""Hunt 14, MLA models (DeepSeek-V2-Lite, DeepSeek-V3 and its R1 / V3.x checkpoints):
regressions found checking kvplan against vLLM 0.11's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.gemm import served_gemm_s
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import MLA_GEMM, measured_step
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli


def _gemm(gpu: str, m: int, n: int, k: int) -> float:
    return float(served_gemm_s(gpu, np.array([m]), n, k, MLA_GEMM)[0])


def test_mla_prefill_core_keeps_the_new_tokens_kv_b_up_projection() -> None:
    # DeepSeek-V3 TP8 on H100 (16 heads a GPU), one 4,096-token prompt. The measured MLA
    # prefill block (aiconfigurator's DeepseekV2MLAAttention forward) runs q_a/kv_a, q_b,
    # kv_b (vLLM's _forward_prefill up-projects the new tokens' latent: m=4096 n=16x256=4096
    # k=512), the attention kernel and o_proj. The step adds q_a/kv_a, q_b and o_proj from
    # the GEMM tables, and kv_b only over a prefill's *cached* context, so the core must keep
    # the new tokens' kv_b: per layer, core = block - fused q_a/kv_a - q_b - o_proj. kvplan took
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
    # (hunt 15: vLLM runs q_a and kv_a as one replicated fused_qkv_a_proj, n = 1536 + 576)
    per_token = (_gemm(gpu, s, 2112, 7168)
                 + _gemm(gpu, s, 3072, 1536) + _gemm(gpu, s, 7168, 2048))
    kv_b = _gemm(gpu, s, 4096, 512)
    assert kv_b > 0
    pairs = s * (s + 1) // 2
    assert ms.full.per_pair_s * pairs == pytest.approx(61 * (block - per_token), rel=1e-9)


def _v32_config(tmp_path: Path) -> str:
    """deepseek-ai/DeepSeek-V3.2-Exp's config.json: DeepSeek-V3's fields plus its indexer."""
    src = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
    cfg = json.loads((src / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg.update({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
                "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_fp8_ds_mla_is_a_kv_cache_dtype_deepseek_v32_takes(tmp_path: Path) -> None:
    # vLLM 0.11's CacheDType lists "fp8_ds_mla", and DeepseekV32ForCausalLM.
    # verify_and_update_config keeps it (it starts with "fp8"): the same cache as 'auto'/fp8,
    # 61 layers x (656 B latent + 132 B indexer key) = 48,068 B/token. kvplan answered
    # "unknown --kv-cache-dtype 'fp8_ds_mla'" (exit 2).
    r = run_cli("kv", _v32_config(tmp_path), "--kv-cache-dtype", "fp8_ds_mla", "--json")
    assert r.code == 0, r.err
    auto = run_cli("kv", _v32_config(tmp_path), "--json")
    assert r.json()["bytes_per_token"] == auto.json()["bytes_per_token"] == 61 * (656 + 132)


def test_fp8_ds_mla_on_dense_mla_says_what_it_is() -> None:
    # DeepSeek-V3 has no sparse indexer: its FlashMLA / CUTLASS MLA latent is bf16 or fp8, so
    # fp8_ds_mla is refused, now naming the format's model instead of calling it unknown.
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8",
                "--kv-cache-dtype", "fp8_ds_mla")
    assert_one_line_error(r)
    assert "DeepSeek-V3.2" in r.err and "unknown" not in r.err
