"""vLLM's mxfp4 MoE layouts pad gpt-oss's experts (kvplan.costs.memory.mxfp4_layout), by GPU."""

from __future__ import annotations

import pytest

from kvplan.costs.memory.mxfp4_layout import mxfp4_backend, mxfp4_padding_bytes
from kvplan.costs.memory.params import weight_bytes_per_gpu
from kvplan.costs.memory.plan import plan_memory
from kvplan.errors import DoesNotFitError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

GiB = 1024**3


def _expert(i: int, h: int, k13: int, k2: int) -> int:
    """w13 (2i x k13) + w2 (h x k2): fp4 values, e8m0 scale per 32, bf16 biases."""
    return 2 * i * (k13 // 2 + k13 // 32) + 2 * i * 2 + h * (k2 // 2 + k2 // 32) + h * 2


def test_hopper_pads_the_contraction_axis_to_512_values() -> None:
    # gpt-oss-20b: 24 layers x 32 experts, H = I = 2880; Hopper: 2880 -> 3072 on both axes
    m = load_model("openai/gpt-oss-20b")
    per_expert = _expert(2880, 2880, 3072, 3072) - _expert(2880, 2880, 2880, 2880)
    assert per_expert == 2 * 2880 * 96 + 2 * 2880 * 6 + 2880 * 96 + 2880 * 6
    pad = mxfp4_padding_bytes(m, load_gpu("H100"), quantization=None, tp=1, pp=1)
    assert pad == 24 * 32 * per_expert == 676_823_040


def test_gpt_oss_20b_weights_match_vllm_log_on_h100() -> None:
    # vLLM 0.11.0 "Model loading took 13.47 GiB" (llm-d empirical-vllm-memory-results.md)
    p = plan_memory(load_model("openai/gpt-oss-20b"), load_gpu("H100"),
                    EngineConfig(block_size=128, max_model_len=16000))
    assert round(p.budget.weights_bytes / GiB, 2) == 13.48  # + 32 MiB float32 rope cache
    assert abs(p.budget.available_kv_bytes / GiB - 50.28) < 0.05


def test_backends_by_architecture() -> None:
    names = {g: mxfp4_backend(load_gpu(g)) for g in ("H100", "H200", "B200", "A100", "L40S",
                                                     "MI300X", "TPU-v5e")}
    assert {g: (b.name if b else None) for g, b in names.items()} == {
        "H100": "triton (Hopper swizzle)", "H200": "triton (Hopper swizzle)",
        "B200": "flashinfer", "A100": "marlin", "L40S": "marlin", "MI300X": "triton (ROCm)",
        "TPU-v5e": None}


def test_marlin_pads_both_axes_and_tp_splits_the_intermediate() -> None:
    # A100, gpt-oss-120b (36 layers x 128 experts): Marlin rounds I/tp up to 128 and H to 256
    m = load_model("openai/gpt-oss-120b")
    a100 = load_gpu("A100")
    tp1 = _expert(2944, 3072, 3072, 2944) - _expert(2880, 2880, 2880, 2880)
    assert mxfp4_padding_bytes(m, a100, quantization=None, tp=1, pp=1) == 36 * 128 * tp1
    tp2 = _expert(1536, 3072, 3072, 1536) - _expert(1440, 2880, 2880, 1440)  # 1440 -> 1536
    assert mxfp4_padding_bytes(m, a100, quantization=None, tp=2, pp=1) == 36 * 128 * tp2
    # vLLM 0.10.1 on the Marlin path logged "Model loading took 65.9651 GiB" (vllm#23278)
    total = weight_bytes_per_gpu(m) + mxfp4_padding_bytes(m, a100, quantization=None, tp=1, pp=1)
    assert abs(total / GiB - 65.97) < 0.1


def test_unquantized_and_dense_models_get_no_padding() -> None:
    h100 = load_gpu("H100")
    assert mxfp4_padding_bytes(load_model("meta-llama/Llama-3.1-8B"), h100,
                               quantization=None, tp=1, pp=1) == 0
    assert mxfp4_padding_bytes(load_model("mistralai/Mixtral-8x7B-v0.1"), h100,
                               quantization="fp8", tp=1, pp=1) == 0


def test_gpt_oss_120b_does_not_fit_one_h100_at_default_utilization() -> None:
    # vLLM 0.10.1: "Available KV cache memory: -2.14 GiB" at 0.9 on one H100 (vllm#23278)
    with pytest.raises(DoesNotFitError, match="no memory left for the KV cache"):
        plan_memory(load_model("openai/gpt-oss-120b"), load_gpu("H100"),
                    EngineConfig(max_model_len=32768))
