"""Hunt 18 (ops18): step pricing against physics (docs/silicon.md, costs/kernels)."""

from __future__ import annotations

import numpy as np
import pytest

import kvplan
from kvplan.costs import kernels as kn
from kvplan.costs.kernels.gemm import served_gemm_s


def test_block_fp8_gemm_never_above_bf16_on_fp8_tensor_cores() -> None:
    # H100, n = 6,144, k = 4,096 (Llama/Qwen qkv), m = 64 decode rows. The bf16 GEMM reads
    # 2 x 6144 x 4096 = 50.3 MB of weights: 20.7 us measured. Block fp8 reads half of that
    # (25.2 MB + 48 x 32 x 4 B of scales) and multiplies at 1,979 vs 989 TFLOP/s: it cannot
    # take longer. The table reads 80.0 us flat from m = 32 to 512 (harness floor), less
    # the m = 1 excess (56.3 - 14.4 = 41.9 us): 38.0 us served before, 1.84x bf16.
    m = np.array([64])
    bf16 = float(kn.gemm_s("H100-SXM-80GB", m, 6144, 4096, "bfloat16")[0])
    blk = float(served_gemm_s("H100-SXM-80GB", m, 6144, 4096, "fp8_block")[0])
    assert bf16 == pytest.approx(20.7e-6, rel=0.02)
    assert blk <= bf16


@pytest.mark.parametrize("gpu", ["H100-SXM-80GB", "H200-SXM-141GB", "B200-SXM-180GB"])
@pytest.mark.parametrize("batch", [16, 64])
def test_fp8_checkpoint_decode_not_slower_than_bf16(gpu: str, batch: int) -> None:
    # The same Qwen3-8B weights as a block-fp8 checkpoint read half the bytes per decode
    # step on a GPU with fp8 tensor cores. Before: H100 b64 TPOT 21.61 ms vs bf16 20.36;
    # H200 19.00 vs 17.19; B200 b16 7.83 vs 6.71 (prompt 2,048, 64 out).
    shape = kvplan.RequestShape(batch=batch, prompt_tokens=2048, output_tokens=64)
    hw = kvplan.load_gpu(gpu)
    tpot = {name: kvplan.request_latency(kvplan.load_model(name), hw, kvplan.EngineConfig(),
                                         shape).tpot_s
            for name in ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8")}
    assert tpot["Qwen/Qwen3-8B-FP8"] <= tpot["Qwen/Qwen3-8B"]


@pytest.mark.parametrize(("model", "prompt", "past"), [
    ("meta-llama/Llama-3.1-8B", 20000, True),   # attn_ctx measures isl to 16,384
    ("meta-llama/Llama-3.1-8B", 16000, False),
    ("deepseek-ai/DeepSeek-V2-Lite", 40000, True),  # mla_ctx measures isl to 32,768
    ("deepseek-ai/DeepSeek-V2-Lite", 30000, False),
])
def test_explain_flags_prefill_attention_past_the_measured_prompt_length(
        model: str, prompt: int, past: bool) -> None:
    # H100's context-attention table measures prompts of 1..16,384 tokens (MLA: 32,768); one
    # 20,000-token prompt's attention is read off the 16,384-token rate scaled by its pairs
    # (20,000 x 20,001 / 2 = 200,010,000 against 134,225,920 measured): past the range, and
    # --explain must mark it so (it did for GEMMs, never for prefill attention).
    from tests.conftest import run_cli

    out = run_cli("latency", model, "--gpu", "H100", "--prompt", str(prompt), "--output", "2",
                  "--explain", "--json")
    assert out.code == 0, out.err
    rows = {o["op"]: o for o in out.json()["step_ops"][0]["ops"]}
    row = rows.get("attention_full") or rows["attention_mla"]
    assert row["extrapolated"] is past


@pytest.mark.parametrize("gpu", ["H200-SXM-141GB", "B200-SXM-180GB", "GB200"])
def test_block_fp8_experts_never_priced_above_bf16_experts(gpu: str) -> None:
    # Qwen3-30B-A3B-FP8 (block fp8, 128 experts top-8) against its bf16 model, one prefill
    # step of 4 x 4,096 tokens: B200's measured block-fp8 MoE rows put the 48 layers' experts
    # at 100.94 ms against 64.87 ms bf16 (TTFT 150.11 vs 114.53 ms), though the fp8 experts
    # read half the bytes at twice the rate; kernels.moe already holds per-tensor fp8 so.
    def ttft(model: str) -> float:
        shape = kvplan.RequestShape(batch=4, prompt_tokens=4096, output_tokens=2)
        return kvplan.request_latency(kvplan.load_model(model), kvplan.load_gpu(gpu),
                                      kvplan.EngineConfig(), shape).ttft_s

    assert ttft("Qwen/Qwen3-30B-A3B-FP8") <= ttft("Qwen/Qwen3-30B-A3B")
