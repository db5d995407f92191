"""hunt9-attn: per-layer cache specs and bytes per token, checked against vLLM 0.11.0's source
(the vllm-0.11.0 wheel from PyPI: v1/kv_cache_interface.py, v1/core/kv_cache_utils.py,
model_executor/models/*.py) and transformers 4.57.0's config classes (which vLLM reads)."""

from __future__ import annotations

from typing import Any

from kvplan.costs.memory.plan import plan_memory
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.kv import kv_spec
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB


def _kinds(cfg: dict[str, Any]) -> list[tuple[str, int]]:
    kv = kv_spec(parse_config(cfg, name="t", file="test"))
    return [(g.spec.kind, g.num_layers) for g in kv.groups]


# ------------------------------------------- interleaved families without layer_types

# CohereForAI/c4ai-command-r7b-12-2024 config.json (fields as published on the Hub, recalled;
# transformers 4.48 wrote sliding_window_pattern, no layer_types).
COMMAND_R7B: dict[str, Any] = {
    "architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2", "head_dim": 128,
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 132000,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "sliding_window": 4096, "sliding_window_pattern": 4, "torch_dtype": "bfloat16",
    "vocab_size": 256000, "use_embedding_sharing": True,
}


def test_command_r7b_every_fourth_layer_is_global() -> None:
    """transformers Cohere2Config builds layer_types `sliding if (i + 1) % 4 else full` and
    vLLM commandr.py gives only "sliding_attention" layers the window: 24 sliding + 8 full.
    kvplan read sliding_window alone and made all 32 layers sliding."""
    assert _kinds(COMMAND_R7B) == [("sliding", 24), ("full", 8)]


def test_command_r7b_capacity_four_groups() -> None:
    """20 GiB of KV memory on an H100, max_model_len 132,000, 8,192 batched tokens.
    page = 16 x 8 x 128 x 2 x 2 = 65,536 B; groups of 8 layers: 3 sliding + 1 full;
    num_blocks = 20 GiB // 65,536 // 8 = 40,960; tokens = 40,960 // 4 x 16 = 163,840;
    pages/request = 3 x (cdiv(4095 + 8192, 16) + 1) + cdiv(132000, 16) = 3 x 769 + 8,250 =
    10,557; concurrency = 40,960 / 10,557 = 3.88x (kvplan said 13.32x: all sliding)."""
    p = plan_memory(parse_config(COMMAND_R7B, name="t", file="test"), load_gpu("H100"),
                    EngineConfig(kv_cache_memory_bytes=20 * GiB))
    assert (p.num_blocks, p.kv_cache_tokens, p.pages_per_request) == (40_960, 163_840, 10_557)
    assert round(p.max_concurrency, 2) == 3.88


def test_gpt_oss_without_layer_types_alternates() -> None:
    """GptOssConfig's default layer_types alternate sliding / full from layer 0."""
    cfg = {"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 24,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
           "sliding_window": 128, "vocab_size": 201088, "max_position_embeddings": 131072}
    assert _kinds(cfg) == [("sliding", 12), ("full", 12)]


def test_cohere2_without_window_is_full() -> None:
    """sliding_window null: vLLM passes per_layer_sliding_window=None, full attention."""
    cfg = {**COMMAND_R7B, "sliding_window": None}
    assert _kinds(cfg) == [("full", 32)]


# ------------------------------------------- model-wide sliding_window: Qwen's flag, long windows

QWEN2_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 32768,
    "sliding_window": 4096, "max_window_layers": 28, "torch_dtype": "bfloat16",
}


def test_qwen2_window_without_use_sliding_window_is_off() -> None:
    """transformers Qwen2Config: use_sliding_window defaults to False and then
    `self.sliding_window = sliding_window if self.use_sliding_window else None`; vLLM's
    cache_config.sliding_window is that None, so every layer is full attention. kvplan
    defaulted the flag to true: 28 sliding layers of window 4096."""
    assert _kinds(QWEN2_7B) == [("full", 28)]
    assert _kinds({**QWEN2_7B, "use_sliding_window": True}) == [("sliding", 28)]
    assert _kinds({**QWEN2_7B, "use_sliding_window": True, "max_window_layers": 0}) == [
        ("sliding", 28)]


def test_qwen2_partial_sliding_is_refused_as_vllm_refuses() -> None:
    """max_window_layers 20 of 28 layers: layer_types mixes full and sliding, and vLLM 0.11
    qwen2.py asserts max_window_layers == num_hidden_layers."""
    import pytest

    from kvplan.errors import ConfigError

    with pytest.raises(ConfigError, match="max_window_layers"):
        _kinds({**QWEN2_7B, "use_sliding_window": True, "max_window_layers": 20})


def test_window_as_long_as_the_context_is_still_sliding() -> None:
    """microsoft/Phi-3-mini-128k-instruct: sliding_window 262,144 > max_position_embeddings
    131,072 (longrope: not scaled). vLLM makes every layer a SlidingWindowSpec(262144), whose
    request needs cdiv(min(262,143 + 8,192, 131,072), 16) + 1 = 8,193 pages, not 8,192.
    page = 16 x 32 x 96 x 2 x 2 = 196,608 B; one request needs 32 x 8,193 x 196,608 =
    51,545,899,008 B (48.01 GiB), so with --kv-cache-memory 48GiB vLLM refuses to start;
    kvplan (full attention: 32 x 8,192 x 196,608 = exactly 48 GiB) said it fits."""
    cfg = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
           "intermediate_size": 8192, "vocab_size": 32064, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "sliding_window": 262144,
           "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
           "torch_dtype": "bfloat16"}
    assert _kinds(cfg) == [("sliding", 32)]
    import pytest

    from kvplan.errors import DoesNotFitError

    with pytest.raises(DoesNotFitError) as err:
        plan_memory(parse_config(cfg, name="t", file="test"), load_gpu("H100"),
                    EngineConfig(kv_cache_memory_bytes=48 * GiB))
    assert err.value.needed_bytes == 51_545_899_008


# ------------------------------------------- DeepSeek-V3.2: fp8_ds_mla latent + indexer keys


def _deepseek_v32() -> dict[str, Any]:
    """deepseek-ai/DeepSeek-V3.2-Exp config.json: DeepSeek-V3's fields plus the indexer's
    (index_head_dim 128, index_n_heads 64, index_topk 2048), model_type deepseek_v32."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
    cfg = json.loads((path / "deepseek-ai--DeepSeek-V3.json").read_text())
    return {**cfg, "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
            "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048}


def test_deepseek_v32_bytes_per_token() -> None:
    """vLLM 0.11 DeepseekV32ForCausalLM.verify_and_update_config: 'auto' and fp8 ->
    "fp8_ds_mla", whose MLAAttentionSpec page is block x 656 (512 fp8 + 4 fp32 scales + 64
    bf16 rope); each layer also caches its indexer key (DeepseekV32IndexerCache:
    MLAAttentionSpec(num_kv_heads=1, head_size=128 + 128 // 128 x 4 = 132, uint8)).
    61 x (656 + 132) = 48,068 B/token (kvplan: 61 x 576 x 2 = 70,272 for auto, 35,136 for
    fp8); bfloat16: 61 x (1,152 + 132) = 78,324."""
    model = parse_config(_deepseek_v32(), name="t", file="test")
    assert kv_spec(model).bytes_per_token == 48_068
    assert kv_spec(model, "fp8").bytes_per_token == 48_068
    assert kv_spec(model, "bfloat16").bytes_per_token == 78_324
    assert kv_spec(model).precision.name == "fp8_ds_mla"


def test_deepseek_v32_capacity_one_group_blocks_of_64() -> None:
    """TP 8 on a B200, 20 GiB of KV memory. vLLM: CUTLASS MLA forces 128, then
    `if use_sparse and cache_config.block_size != 64` forces 64. Latent + indexer specs differ,
    so one UniformTypeKVCacheSpecs group, page = 61 x 64 x (656 + 132) = 3,076,352 B;
    num_blocks = 21,474,836,480 // 3,076,352 = 6,980; tokens 6,980 x 64 = 446,720;
    concurrency 6,980 / cdiv(163,840, 64) = 6,980 / 2,560 = 2.73x."""
    p = plan_memory(parse_config(_deepseek_v32(), name="t", file="test"), load_gpu("B200"),
                    EngineConfig(tensor_parallel_size=8, kv_cache_memory_bytes=20 * GiB))
    assert (p.block_size, len(p.groups), p.num_blocks, p.kv_cache_tokens) == (
        64, 1, 6_980, 446_720)
    assert round(p.max_concurrency, 2) == 2.73
    assert p.settings.block_size_log == (
        "Forcing kv cache block size to 64 for FlashMLASparse backend.")


def test_deepseek_v3_unchanged() -> None:
    """No index_topk: plain MLA, 61 x 576 x 2 = 70,272 B/token at bf16."""
    from kvplan.specs.catalog import load_model

    assert kv_spec(load_model("deepseek-ai/DeepSeek-V3")).bytes_per_token == 70_272


# ------------------------------------------- cache layouts priced as plain decoder layers


def test_mllama_cross_attention_layers_refused() -> None:
    """meta-llama/Llama-3.2-11B-Vision text_config: 40 layers of which 8
    (cross_attention_layers) attend to image tokens. kvplan priced 2 x 40 x 8 x 128 x 2 =
    163,840 B/token; vLLM 0.11 refuses the architecture (supported until 0.10.2)."""
    import pytest

    from kvplan.errors import ConfigError

    text = {"model_type": "mllama_text_model", "hidden_size": 4096, "num_hidden_layers": 40,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
            "intermediate_size": 14336, "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38]}
    with pytest.raises(ConfigError, match="cross_attention_layers"):
        parse_config({"model_type": "mllama", "text_config": text}, name="t", file="test")


def test_encoder_decoder_and_kv_sharing_refused() -> None:
    """T5 (is_encoder_decoder, d_kv 128 != d_model / num_heads = 8 for t5-11b) and Gemma 3n
    (num_kv_shared_layers: the last 15 of 35 layers reuse earlier layers' KV in vLLM's
    gemma3n.py, so they hold no cache of their own)."""
    import pytest

    from kvplan.errors import ConfigError

    t5 = {"model_type": "t5", "d_model": 1024, "d_kv": 128, "num_heads": 128, "num_layers": 24,
          "vocab_size": 32128, "is_encoder_decoder": True}
    with pytest.raises(ConfigError, match="is_encoder_decoder"):
        parse_config(t5, name="t", file="test")
    g3n = {"model_type": "gemma3n_text", "hidden_size": 2048, "num_hidden_layers": 35,
           "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
           "vocab_size": 262400, "num_kv_shared_layers": 15, "intermediate_size": 16384}
    with pytest.raises(ConfigError, match="num_kv_shared_layers"):
        parse_config(g3n, name="t", file="test")
