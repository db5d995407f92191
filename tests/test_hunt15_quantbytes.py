"""hunt15 quantbytes: the weight bytes of quantized checkpoints as vLLM 0.11 holds them on the
GPU ("Model loading took"), derived from each quantization method's create_weights and
process_weights_after_loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.plan import plan_memory
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

# Llama-3.1-8B, GPTQ 4-bit, group 128, symmetric (the usual export): qweight + fp16 scales
# (6,979,321,856 / 2 + 6,979,321,856 / 64 = 3,598,712,832 B), embedding + lm_head
# 2,101,346,304 B, norms 532,480 B, rope cache 33,554,432 B = 5,734,146,048 B: what the
# Marlin kernel keeps (it replaces qzeros and g_idx with empty tensors).
GPTQ4_MARLIN = 5_734_146_048
# Per decoder layer, the fused vLLM layers (N x K): qkv_proj 6,144 x 4,096, o_proj 4,096 x
# 4,096, gate_up_proj 28,672 x 4,096, down_proj 4,096 x 14,336.
# qzeros, int32 (K / 128) x (N x bits / 32): 4-bit 32 x 768 x 4 + 32 x 512 x 4 + 32 x 3,584 x 4
# + 112 x 512 x 4 = 98,304 + 65,536 + 458,752 + 229,376 = 851,968 B (8-bit: 1,703,936 B).
# g_idx, int32 per input row: (4,096 x 3 + 14,336) x 4 = 106,496 B.
QZEROS4, QZEROS8, G_IDX = 32 * 851_968, 32 * 1_703_936, 32 * 106_496


def _gptq(**q: Any) -> ModelSpec:
    path = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
    cfg = json.loads((path / "meta-llama--Llama-3.1-8B.json").read_text())
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True,
            "desc_act": False}
    return parse_config({**cfg, "quantization_config": {**base, **q}}, name="q", file="t")


def _weights(model: ModelSpec, gpu: str, **engine: Any) -> int:
    return plan_memory(model, load_gpu(gpu), EngineConfig(**engine)).budget.weights_bytes


def test_gptq_on_hopper_runs_machete_which_keeps_qzeros_and_g_idx() -> None:
    """vLLM 0.11 tries MacheteLinearKernel before Marlin for GPTQMarlinLinearMethod on sm90
    (an H100 log: "Using MacheteLinearKernel for GPTQMarlinLinearMethod", vllm#23066);
    Machete repacks qweight and scales and leaves qzeros and g_idx allocated.
    4-bit: 5,734,146,048 + 27,262,976 + 3,407,872 = 5,764,816,896 B (before: 5,734,146,048);
    8-bit: 9,223,806,976 (Marlin) + 54,525,952 + 3,407,872 = 9,281,740,800 B."""
    assert _weights(_gptq(), "H100") == GPTQ4_MARLIN + QZEROS4 + G_IDX == 5_764_816_896
    assert _weights(_gptq(bits=8), "H100") == 9_223_806_976 + QZEROS8 + G_IDX == 9_281_740_800


def test_gptq_on_ampere_runs_marlin_which_frees_qzeros_and_g_idx() -> None:
    """Marlin (A100): qzeros and g_idx become empty tensors; 8-bit keeps 9,223,806,976 B
    (no 8-bit qzeros: the earlier fuzz's 9,248,186,368 is neither kernel's figure)."""
    assert _weights(_gptq(), "A100-80GB-SXM") == GPTQ4_MARLIN
    assert _weights(_gptq(bits=8), "A100-80GB-SXM") == 9_223_806_976


def test_gptq_act_order_keeps_g_idx_and_its_sort_order() -> None:
    """desc_act: Marlin keeps the sorted g_idx and g_idx_sort_indices (int32 each per input
    row): + 2 x 3,407,872 = 5,740,961,792 B on A100. Machete (H100, TP1) keeps qzeros,
    g_idx and the argsort perm: 5,734,146,048 + 27,262,976 + 2 x 3,407,872 = 5,768,224,768.
    TP2: 3,598,712,832 / 2 + 2,101,346,304 / 2 + 532,480 + 33,554,432 = 2,884,116,480 B;
    Marlin (A100) adds 8 B a row of each layer's K: qkv and gate_up 4,096, o_proj 2,048,
    down_proj 7,168 (K split): 8 x 17,408 = 139,264 B a layer. On H100, o_proj and down_proj
    split K, which Machete refuses with act order (Marlin: 16,384 + 57,344 B); qkv (N 3,072)
    and gate_up (N 14,336) stay on Machete: qzeros 32 x 384 x 4 + 32 x 1,792 x 4 = 278,528 B,
    g_idx + perm 2 x 2 x 4 x 4,096 = 65,536 B: 417,792 B a layer."""
    act = _gptq(desc_act=True)
    assert _weights(act, "A100-80GB-SXM") == GPTQ4_MARLIN + 2 * G_IDX == 5_740_961_792
    assert _weights(act, "H100") == GPTQ4_MARLIN + QZEROS4 + 2 * G_IDX == 5_768_224_768
    tp2 = 2_884_116_480
    full_scales = 18_874_368
    assert _weights(act, "A100-80GB-SXM", tensor_parallel_size=2) == \
        tp2 + 32 * 139_264 + full_scales
    assert _weights(act, "H100", tensor_parallel_size=2) == tp2 + 32 * 417_792 + full_scales


def test_quantization_gptq_forces_the_exllama_kernel_which_keeps_qzeros() -> None:
    """``--quantization gptq`` on a Marlin-compatible checkpoint: vLLM logs "you specified
    quantization=gptq explicitly, so forcing gptq" and GPTQLinearMethod keeps qzeros
    (int32, 27,262,976 B at 4 bits) and empties g_idx: 5,761,409,024 B on any GPU; a 3-bit
    (symmetric) checkpoint never fits gptq_marlin's TYPE_MAP and keeps its qzeros too:
    values 3/8 B a weight, not 1/2 (- 6,979,321,856 / 8 = - 872,415,232 B), qzeros 3/4 of
    the 4-bit ones (+ 20,447,232 B)."""
    assert _weights(_gptq(), "A100-80GB-SXM", quantization="gptq") == \
        GPTQ4_MARLIN + QZEROS4 == 5_761_409_024
    assert _weights(_gptq(), "H100", quantization="gptq_marlin") == GPTQ4_MARLIN + QZEROS4 + G_IDX
    assert _weights(_gptq(bits=3), "H100") == GPTQ4_MARLIN - 872_415_232 + 20_447_232


def test_quantization_needing_a_quantized_checkpoint_is_marked_a_what_if() -> None:
    """vLLM 0.11 builds GPTQ / AWQ / ModelOpt from the checkpoint's own config
    (``get_quant_config``: "Cannot find the config file for gptq"), and mxfp4 cannot load a
    MoE's 16-bit experts: on an unquantized checkpoint vLLM does not start. kvplan prices the
    what-if (Llama-3.1-8B -q gptq: 5,734,146,048 B on A100, the 4-bit export's weights) and
    now says so; fp8 (online quantization) and mxfp4 on a dense model (linears stay 16-bit)
    are what vLLM serves: no note."""
    from kvplan.specs.catalog import load_model

    llama = load_model("meta-llama/Llama-3.1-8B")
    plan = plan_memory(llama, load_gpu("A100-80GB-SXM"), EngineConfig(quantization="gptq"))
    assert plan.budget.weights_bytes == GPTQ4_MARLIN
    assert "what-if" in plan.settings.quantization_note
    assert "4-bit, a scale per 128" in plan.settings.quantization_note
    for q, model in (("awq", llama), ("modelopt", llama),
                     ("mxfp4", load_model("mistralai/Mixtral-8x7B-v0.1"))):
        s = plan_memory(model, load_gpu("H200"),
                        EngineConfig(quantization=q, tensor_parallel_size=2)).settings
        assert s.quantization_note.startswith(f"--quantization {q} on a checkpoint without")
    for q in ("fp8", "mxfp4", None):
        s = plan_memory(llama, load_gpu("H100"), EngineConfig(quantization=q)).settings
        assert s.quantization_note == ""
    gptq = plan_memory(_gptq(), load_gpu("H100"), EngineConfig(quantization="gptq")).settings
    assert gptq.quantization_note == ""


def test_capacity_prints_the_what_if_note() -> None:
    from tests.conftest import run_cli

    out = run_cli("capacity", "meta-llama/Llama-3.1-8B", "-q", "awq", "--json")
    assert out.json()["quantization_note"].startswith("--quantization awq on a")
    text = run_cli("capacity", "meta-llama/Llama-3.1-8B", "-q", "gptq").out
    assert "note: --quantization gptq on a checkpoint without a quantization_config" in \
        " ".join(text.split())
