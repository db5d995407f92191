"""hunt15 quant2: what vLLM 0.11's GPTQ kernels keep on the GPU that a plain per-GPU pricing
of values + scales misses: act order's unsplit scales on row-parallel layers, and the MoE
experts' qzeros / g_idx (GPTQMarlinMoEMethod) or repeated scales (MoeWNA16Method)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.plan import plan_memory
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

_MODELS = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"


def _gptq(name: str, **q: Any) -> ModelSpec:
    cfg = json.loads((_MODELS / f"{name}.json").read_text())
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True,
            "desc_act": False}
    return parse_config({**cfg, "quantization_config": {**base, **q}}, name="q", file="t")


def _weights(model: ModelSpec, gpu: str, **engine: Any) -> int:
    return plan_memory(model, load_gpu(gpu), EngineConfig(**engine)).budget.weights_bytes


def test_act_order_keeps_the_whole_k_scales_of_row_parallel_layers_on_every_gpu() -> None:
    """GPTQMarlinLinearMethod: ``marlin_repeat_scales_on_all_ranks(act_order, ...)`` is True
    with act order, so a row-parallel layer's scales are (input_size / 128) x N on every
    GPU, not (input_size_per_partition / 128) x N. Llama-3.1-8B, TP2, fp16 scales:
    o_proj (K 4,096, N 4,096): 32 x 4,096 x 2 = 262,144 B kept, 131,072 priced -> + 131,072;
    down_proj (K 14,336, N 4,096): 112 x 4,096 x 2 = 917,504 kept -> + 458,752;
    32 layers x 589,824 = + 18,874,368 B over the act-order-free checkpoint's extra."""
    plain, act = _gptq("meta-llama--Llama-3.1-8B"), _gptq("meta-llama--Llama-3.1-8B",
                                                          desc_act=True)
    g_idx = 32 * 139_264  # Marlin: g_idx + sort indices, 8 B per row of each layer's K
    assert _weights(act, "A100-80GB-SXM", tensor_parallel_size=2) - _weights(
        plain, "A100-80GB-SXM", tensor_parallel_size=2) == g_idx + 18_874_368
    # TP1 splits nothing: act order adds only the g_idx tensors (8 B x 4,096 x 3 + 14,336)
    assert _weights(act, "A100-80GB-SXM") - _weights(plain, "A100-80GB-SXM") == 32 * 212_992


def test_act_order_under_the_exllama_kernel_keeps_the_whole_k_scales_and_qzeros() -> None:
    """``--quantization gptq`` (GPTQLinearMethod): with act order a row-parallel layer split
    over TP keeps scale_and_zero_size = input_size // group (exllama_state UNUSED) and the
    int32 qzeros stay allocated. Llama-3.1-8B TP2, per layer against the act-order-free
    checkpoint: scales + 589,824 (as above); qzeros o_proj 32 x 512 x 4 - 16 x 512 x 4 =
    32,768, down_proj 112 x 512 x 4 - 56 x 512 x 4 = 114,688; g_idx (int32, one per row of
    the GPU's K) 4 x (4,096 + 4,096 + 2,048 + 7,168) = 69,632: 806,912 B x 32 = 25,821,184."""
    plain, act = _gptq("meta-llama--Llama-3.1-8B"), _gptq("meta-llama--Llama-3.1-8B",
                                                          desc_act=True)
    run = {"tensor_parallel_size": 2, "quantization": "gptq"}
    assert _weights(act, "A100-80GB-SXM", **run) - _weights(
        plain, "A100-80GB-SXM", **run) == 25_821_184


def _expert_extra(model: ModelSpec, gpu: str, **engine: Any) -> int:
    """"Model loading took" less the priced weights, the linear layers' kernel tensors and the
    rope cache: what the routed experts' MoE method adds (0 before kvplan counted it)."""
    from kvplan.costs.memory.activation import rope_cache_bytes
    from kvplan.costs.memory.ep_memory import parallel_weights
    from kvplan.costs.memory.gptq_kernels import gptq_kernel_bytes
    from kvplan.costs.memory.params import weight_bytes_per_gpu
    from kvplan.costs.memory.settings import resolve_settings

    hw, cfg = load_gpu(gpu), EngineConfig(**engine)
    s = resolve_settings(model, hw, cfg)
    priced = (parallel_weights(model, hw, s) if s.dp > 1 or s.expert_parallel else
              weight_bytes_per_gpu(model, quantization=s.quantization, tp=s.tp))
    kernel = gptq_kernel_bytes(model, hw, quantization=s.quantization, tp=s.tp, pp=s.pp)
    return _weights(model, gpu, **engine) - priced - kernel - rope_cache_bytes(model)


# Qwen3-30B-A3B: hidden 2,048, 128 experts of intermediate 768, 48 MoE layers, bf16.
Q30 = "Qwen--Qwen3-30B-A3B"


def test_gptq_marlin_moe_keeps_the_experts_qzeros() -> None:
    """GPTQMarlinMoEMethod.create_weights allocates w13_qzeros (E, hidden/128, 2 I / 8) and
    w2_qzeros (E, I/128, hidden/8) in params_dtype (bf16) and process_weights_after_loading
    never replaces them (only qweight / scales are repacked; g_idx emptied without act
    order). Per expert, TP1: 16 x 192 x 2 + 6 x 256 x 2 = 9,216 B; x 128 x 48 = 56,623,104.
    TP2 (I 384 a GPU): 16 x 96 x 2 + 3 x 256 x 2 = 4,608 B -> 28,311,552. EP over 2 GPUs:
    whole experts (9,216 B), 64 a GPU -> 28,311,552. 8-bit (pack 4): 16 x 384 x 2 +
    6 x 512 x 2 = 18,432 B -> 113,246,208."""
    q30 = _gptq(Q30)
    assert _expert_extra(q30, "H100") == 128 * 48 * 9_216 == 56_623_104
    assert _expert_extra(q30, "A100-80GB-SXM") == 56_623_104  # Marlin MoE on any GPU
    assert _expert_extra(q30, "H100", tensor_parallel_size=2) == 28_311_552
    assert _expert_extra(q30, "H100", tensor_parallel_size=2,
                         enable_expert_parallel=True) == 64 * 48 * 9_216
    assert _expert_extra(_gptq(Q30, bits=8), "H100") == 128 * 48 * 18_432


def test_gptq_marlin_moe_act_order_keeps_g_idx_and_the_whole_w2_scales() -> None:
    """desc_act at TP2 (I 384 a GPU, 768 in all): w2_scales and w2_qzeros are
    ``load_full_w2`` (768 / 128 = 6 groups, priced 3), the sorted g_idx and sort indices stay
    (int32, 2 x (2,048 + 384) per expert). Per expert: qzeros 16 x 96 x 2 + 6 x 256 x 2 =
    6,144; scales (6 - 3) x 2,048 x 2 = 12,288; g_idx 8 x 2,432 = 19,456: 37,888 B
    x 128 x 48 = 232,783,872 B. TP1 (nothing split): 9,216 + 8 x 2,816 = 31,744 B."""
    act = _gptq(Q30, desc_act=True)
    assert _expert_extra(act, "A100-80GB-SXM", tensor_parallel_size=2) == 128 * 48 * 37_888
    assert _expert_extra(act, "A100-80GB-SXM") == 128 * 48 * 31_744


def test_moe_wna16_fallback_repeats_scales_of_a_halved_group() -> None:
    """TP4: I 192 a GPU, 192 % max(64, 128) != 0, so check_moe_marlin_supports_layer fails
    and GPTQMarlinConfig falls back to MoeWNA16Method, which halves the group to 64 (192 %
    128 != 0) and stores every scale twice: w13 2 x 192 x 2,048 / 64 = 12,288 scales
    (priced 384 x 16 = 6,144), w2 2,048 x 192 / 64 = 6,144 (priced 2,048 x 2 = 4,096):
    (6,144 + 2,048) x 2 B = 16,384 B an expert, x 128 x 48 = 100,663,296 B; no qzeros, no
    g_idx. ``-q gptq`` (GPTQConfig) sends experts to MoeWNA16 with sym forced True: an
    asymmetric checkpoint's priced 4-bit zeros are not held, TP1: w13 1,536 x 16 / 2 +
    w2 2,048 x 6 / 2 = 18,432 B an expert less (-113,246,208 B)."""
    q30 = _gptq(Q30)
    assert _expert_extra(q30, "H100", tensor_parallel_size=4) == 128 * 48 * 16_384
    assert _expert_extra(q30, "H100", quantization="gptq") == 0
    asym = _gptq(Q30, sym=False)
    assert _expert_extra(asym, "H100") == -128 * 48 * 18_432


def test_awq_moe_on_moe_wna16_repeats_scales_and_zeros() -> None:
    """AWQ (zero_point, group 128): AWQMarlinConfig sends experts to AWQMoEMethod where
    check_moe_marlin_supports_layer passes (TP1: nothing beyond the priced 4-bit values,
    fp16 scales and 4-bit zeros), else to MoeWNA16Method with has_zp: TP4 halves the group
    to 64 and stores scales and uint8-packed zeros per 64: 18,432 scale rows (priced 10,240,
    as above) -> + 8,192 x 2 B; zeros 18,432 x 4 bits = 9,216 B (priced 5,120) -> + 4,096:
    20,480 B an expert x 128 x 48 = 125,829,120 B."""
    awq = _gptq(Q30, quant_method="awq", zero_point=True, version="gemm")
    assert _expert_extra(awq, "H100") == 0
    assert _expert_extra(awq, "H100", tensor_parallel_size=4) == 128 * 48 * 20_480


def test_moe_experts_vllm_cannot_load_are_refused(tmp_path: Path) -> None:
    """GPTQ 2/3-bit experts never reach Marlin MoE (GPTQMarlinConfig.TYPE_MAP: 4 / 8 bits) and
    MoeWNA16Method takes 4 or 8 bits (its bit8_pack_factor, ``assert weight_bits == 4 or
    weight_bits == 8``); at TP16 Qwen3-30B-A3B's 768 / 16 = 48 rows need a group of 16,
    below the ``assert group_size >= 32`` of create_weights. Both were priced as if served
    (3-bit TP1: 12.07 GiB of weights); now one line, exit 2, as the CLI refuses what vLLM
    cannot start."""
    from tests.conftest import assert_one_line_error, run_cli

    cfg = json.loads((_MODELS / f"{Q30}.json").read_text())
    q = {"quant_method": "gptq", "bits": 3, "group_size": 128, "sym": True, "desc_act": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": q}))
    result = run_cli("capacity", str(path), "--gpu", "H100")
    assert_one_line_error(result)
    assert "MoeWNA16Method" in result.err and "not 3-bit" in result.err
    path.write_text(json.dumps({**cfg, "quantization_config": {**q, "bits": 4}}))
    result = run_cli("capacity", str(path), "--gpu", "H100", "-tp", "16")
    assert_one_line_error(result)
    assert "below 32" in result.err
    assert run_cli("capacity", str(path), "--gpu", "H100", "-tp", "8").code == 0  # group 32
