"""hunt8-capacity: capacity / memory arithmetic checked against vLLM 0.11.0's source
(the vllm-0.11.0 sdist from PyPI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.costs.memory.activation import rope_cache_bytes
from kvplan.costs.memory.params import weight_bytes_per_gpu
from kvplan.costs.memory.plan import plan_memory
from kvplan.errors import ConfigError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB
from tests.fuzz2_support import assert_error, run_case

# ------------------------------------------- MLA: FlashMLA forces 64 whatever --block-size


def test_mla_block_128_on_hopper_runs_flashmla_blocks_of_64() -> None:
    """vLLM 0.11.0 platforms/cuda.py: `if use_flashmla and is_flashmla_supported()[0] and
    cache_config.block_size != 64: cache_config.block_size = 64`. kvplan kept 128 (a multiple
    of 64): 10,271 blocks of 128 instead of vLLM's 20,542 of 64, and no "Forcing" line.
    DeepSeek-V2-Lite, 1 GiB of KV memory: a block of 64 = 64 x 576 x 2 B x 27 layers =
    1,990,656 B; 1 GiB // 1,990,656 = 539 blocks, 539 x 64 = 34,496 tokens."""
    p = plan_memory(load_model("deepseek-ai/DeepSeek-V2-Lite"), load_gpu("H100"),
                    EngineConfig(block_size=128, max_model_len=4096, kv_cache_memory_bytes=GiB))
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (64, 539, 34_496)
    assert p.settings.block_size_log == "Forcing kv cache block size to 64 for FlashMLA backend."


def test_disagg_hopper_and_blackwell_mla_pools_have_no_common_block(tmp_path: Path) -> None:
    """FlashMLA (H100) forces 64 and CUTLASS MLA (B200) 128 whatever is given: the advice
    was 'give --block-size 128, which both pools keep', which vLLM's H100 pool turns to 64."""
    argv = ["simulate", "deepseek-ai/DeepSeek-V2-Lite", "--disagg", "1P1D", "--prefill-gpu",
            "B200", "--num-prompts", "2", "--block-size", "128", "--json"]
    assert_error(run_case(tmp_path, argv), "no --block-size makes them page alike")


# ------------------------------------------- GPTQ / AWQ: bits and group size from the config


def _quantized_llama(q: dict[str, Any]) -> ModelSpec:
    path = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
    cfg = json.loads((path / "meta-llama--Llama-3.1-8B.json").read_text())
    return parse_config({**cfg, "quantization_config": q}, name="q", file="test")


# Llama-3.1-8B: 32 layers x (4096 x (4096 + 1024 + 1024 + 4096) + 3 x 4096 x 14336)
# = 6,979,321,856 linear weights; embedding + lm_head 2 x 128256 x 4096 x 2 B =
# 2,101,346,304 B; norms (2 x 32 + 1) x 4096 x 2 B = 532,480 B; rope cache 131072 x 128 x 2 B
# = 33,554,432 B
LINEAR, REST = 6_979_321_856, 2_101_346_304 + 532_480 + 33_554_432


def test_gptq_8bit_checkpoint_is_priced_at_8_bits() -> None:
    """vLLM GPTQConfig.from_config reads bits (8: qweight packs 4 per int32) and group_size;
    kvplan priced every GPTQ checkpoint as 4-bit: 5,734,146,048 B for an Int8 export.
    8 bits: 6,979,321,856 B + one fp16 scale per 128 = 6,979,321,856 / 64 = 109,051,904 B."""
    m = _quantized_llama({"quant_method": "gptq", "bits": 8, "group_size": 128, "sym": True,
                          "desc_act": False})
    w = weight_bytes_per_gpu(m)
    assert w + rope_cache_bytes(m, "auto") == LINEAR + LINEAR // 64 + REST == 9_223_806_976


def test_awq_group_64_and_gptq_per_channel_scales() -> None:
    """AWQ group_size 64: a fp16 scale and a 4-bit zero per 64 inputs
    (LINEAR / 2 + LINEAR / 64 x 2 + LINEAR / 64 / 2); GPTQ group_size -1: one fp16 scale per
    output row (32 x (4096 + 1024 + 1024 + 4096 + 2 x 14336 + 4096) = 1,376,256 rows)."""
    awq = _quantized_llama({"quant_method": "awq", "bits": 4, "group_size": 64,
                            "zero_point": True, "version": "gemm"})
    assert weight_bytes_per_gpu(awq) == LINEAR // 2 + LINEAR // 32 + LINEAR // 128 + REST \
        - 33_554_432
    gptq = _quantized_llama({"quant_method": "gptq", "bits": 4, "group_size": -1, "sym": True,
                             "desc_act": True})
    assert weight_bytes_per_gpu(gptq) == LINEAR // 2 + 1_376_256 * 2 + REST - 33_554_432


def test_awq_other_than_4_bits_is_refused_as_vllm_refuses_it() -> None:
    """vLLM AWQConfig: 'Currently, only 4-bit weight quantization is supported for AWQ'."""
    with pytest.raises(ConfigError, match="4-bit weights only"):
        _quantized_llama({"quant_method": "awq", "bits": 8, "group_size": 128,
                          "zero_point": True})


def _compressed(weights: dict[str, Any]) -> ModelSpec:
    return _quantized_llama({"quant_method": "compressed-tensors", "format": "float-quantized",
                             "ignore": ["lm_head"],
                             "config_groups": {"group_0": {"targets": ["Linear"],
                                                           "weights": weights}}})


def test_compressed_tensors_checkpoints_are_priced_not_refused() -> None:
    """vLLM serves compressed-tensors checkpoints (RedHatAI's -FP8-dynamic, -W4A16, NVFP4);
    kvplan stopped with "unknown --quantization 'compressed-tensors'" though no flag was
    given. FP8 channel scales: 1 byte a weight + one fp32 scale per output row (hunt13: was
    one per matrix, 9,114,755,840 B): 32 x (4096 + 2 x 1024 + 4096 + 28672 + 4096) x 4 B =
    5,505,024 B, + LINEAR + REST = 9,120,260,096 B; W4A16 group 128 symmetric: as GPTQ 4-bit,
    LINEAR / 2 + LINEAR / 64."""
    fp8 = _compressed({"num_bits": 8, "type": "float", "strategy": "channel",
                       "symmetric": True})
    assert weight_bytes_per_gpu(fp8) + rope_cache_bytes(fp8, "auto") == \
        LINEAR + 32 * 43008 * 4 + REST == 9_120_260_096
    w4 = _compressed({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                      "symmetric": True})
    assert weight_bytes_per_gpu(w4) == LINEAR // 2 + LINEAR // 64 + REST - 33_554_432


def test_bitsandbytes_checkpoint_error_names_the_config_not_a_flag(tmp_path: Path) -> None:
    """The refusal said "unknown --quantization 'bitsandbytes'" though no flag was given."""
    path = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
    cfg = json.loads((path / "meta-llama--Llama-3.1-8B.json").read_text())
    cfg["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert_error(run_case(tmp_path, ["capacity", str(tmp_path / "config.json")]),
                 "unknown quant_method 'bitsandbytes' (the checkpoint's quantization_config)")


# ------------------------------------------- hybrid layouts kvplan cannot read are refused

JAMBA = {  # ai21labs/Jamba-v0.1 config.json, the fields kvplan reads
    "architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 65536, "max_position_embeddings": 262144,
    "attn_layer_offset": 4, "attn_layer_period": 8, "expert_layer_offset": 1,
    "expert_layer_period": 2, "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_conv": 4,
    "mamba_d_state": 16, "mamba_expand": 2, "mamba_dt_rank": 256, "torch_dtype": "bfloat16",
}


def test_jamba_is_refused_not_priced_as_32_attention_layers() -> None:
    """Jamba has 4 attention layers (4, 12, 20, 28: attn_layer_offset 4, period 8) and 28
    Mamba layers; vLLM caches KV for the 4 (2 x 4 x 8 x 128 x 2 = 16,384 B/token) plus one
    Mamba state per request. kvplan read no layer kinds from these keys and priced 32 full
    attention layers: 2 x 32 x 8 x 128 x 2 = 131,072 B/token, 8x too much, no warning."""
    with pytest.raises(ConfigError, match="attn_layer_period"):
        parse_config(JAMBA, name="jamba", file="test")
