"""vLLM's rotary cos/sin caches, counted in "Model loading took" (bf16 rows x rotary dim)."""

from __future__ import annotations

from dataclasses import replace

import kvplan
from kvplan.costs.memory.activation import rope_cache_bytes


def test_gemma3_holds_an_unscaled_and_a_linear_x8_cache() -> None:
    # gemma3.py: sliding layers get_rope(max_position 131,072, default scaling); global layers
    # the config's linear x8, whose LinearScalingRotaryEmbedding caches 131,072 x 8 rows:
    # (131,072 + 1,048,576) x 128 x 2 B = 301,989,888 B (288 MiB; one cache was 32 MiB)
    m = kvplan.load_model("google/gemma-3-27b-it")
    assert m.rope_cache_positions == 131_072 * 9
    assert rope_cache_bytes(m) == 301_989_888


def test_one_cache_elsewhere() -> None:
    # Llama-3.1 (llama3 rope: unscaled cache), 131,072 x 128 x 2 B; DeepSeek-V3 (yarn, already
    # the derived 163,840 rows) x qk_rope_head_dim 64 x 2 B; Gemma 2 (no rope_scaling)
    llama = kvplan.load_model("meta-llama/Llama-3.1-8B")
    assert llama.rope_cache_positions == 0 and rope_cache_bytes(llama) == 33_554_432
    assert rope_cache_bytes(kvplan.load_model("deepseek-ai/DeepSeek-V3")) == 163_840 * 64 * 2
    gemma2 = kvplan.load_model("google/gemma-2-9b-it")
    assert gemma2.rope_cache_positions == 0
    assert rope_cache_bytes(gemma2) == gemma2.max_position_embeddings * 256 * 2


def test_gemma3_kv_budget_is_smaller_by_the_second_cache() -> None:
    m, hw = kvplan.load_model("google/gemma-3-27b-it"), kvplan.load_gpu("H100")
    e = kvplan.EngineConfig(max_model_len=8192)
    now = kvplan.plan_memory(m, hw, e).budget
    one_cache = kvplan.plan_memory(replace(m, rope_cache_positions=0), hw, e).budget
    assert one_cache.available_kv_bytes - now.available_kv_bytes == 268_435_456
    assert now.weights_bytes - one_cache.weights_bytes == 268_435_456
