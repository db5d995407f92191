"""Parameter counts and weight bytes against hand arithmetic and published model sizes."""

from __future__ import annotations

import pytest

from kvplan.costs.memory.params import (
    active_weight_bytes_per_gpu,
    param_counts,
    pp_layer_ranges,
    weight_bytes,
    weight_bytes_per_gpu,
)
from kvplan.errors import UnknownNameError
from kvplan.specs.catalog import load_model


def test_llama2_7b_exact() -> None:
    # embed 32000*4096 + lm_head 32000*4096 + 32 layers * (4*4096^2 + 3*4096*11008 + 2*4096)
    # + final norm 4096 = 6,738,415,616 (the count Meta's checkpoint holds)
    c = param_counts(load_model("meta-llama/Llama-2-7b-hf"))
    layer = 4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096
    assert c.total == 2 * 32000 * 4096 + 32 * layer + 4096 == 6_738_415_616
    assert c.active == c.total and c.experts == 0


def test_llama31_8b_gqa_exact() -> None:
    # q,o 4096x4096; k,v 1024x4096 (8 KV heads x 128); MLP 3 x 4096 x 14336; vocab 128256
    c = param_counts(load_model("meta-llama/Llama-3.1-8B"))
    layer_attn = 2 * 4096 * 4096 + 2 * 1024 * 4096
    assert c.attention == 32 * layer_attn
    assert c.total == 2 * 128256 * 4096 + 32 * (layer_attn + 3 * 4096 * 14336 + 2 * 4096) + 4096


# Published totals (active) from /work/shared/data/model-configs/SOURCES.md (model cards).
PUBLISHED = [
    ("meta-llama/Llama-2-7b-hf", 6.74e9, None),
    ("meta-llama/Llama-2-13b-hf", 13.0e9, None),
    ("meta-llama/Llama-2-70b-hf", 69.0e9, None),
    ("meta-llama/Llama-3.1-8B", 8.03e9, None),
    ("meta-llama/Llama-3.1-70B", 70.6e9, None),
    ("meta-llama/Llama-3.1-405B", 405e9, None),
    ("meta-llama/Llama-3.2-1B", 1.23e9, None),
    ("meta-llama/Llama-3.2-3B", 3.21e9, None),
    ("mistralai/Mistral-7B-v0.1", 7.3e9, None),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9),
    ("Qwen/Qwen2.5-7B", 7.61e9, None),
    ("Qwen/Qwen2.5-72B", 72.7e9, None),
    ("Qwen/Qwen3-8B", 8.2e9, None),
    ("Qwen/Qwen3-32B", 32.8e9, None),
    ("Qwen/Qwen3-30B-A3B", 30.5e9, 3.3e9),
    ("Qwen/Qwen3-235B-A22B", 235e9, 22e9),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", 80e9, None),
    ("google/gemma-2-9b-it", 9.24e9, None),
    ("google/gemma-2-27b", 27.2e9, None),
    ("google/gemma-3-27b-it", 27e9, None),  # text tower; the 0.4B SigLIP encoder is not counted
    ("deepseek-ai/DeepSeek-V3", 671e9, 37e9),  # without the 14B MTP module
    ("deepseek-ai/DeepSeek-V2-Lite", 15.7e9, None),
    ("microsoft/Phi-3-mini-4k-instruct", 3.8e9, None),
    ("tiiuae/falcon-7b", 7e9, None),  # model card "7B"; the checkpoint holds 6.92B
    ("openai/gpt-oss-20b", 20.91e9, None),
    ("openai/gpt-oss-120b", 116.83e9, None),
    ("nvidia/Nemotron-H-56B-Base-8K", 56e9, None),
]


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED)
def test_published_counts(name: str, total: float, active: float | None) -> None:
    c = param_counts(load_model(name))
    assert c.total == pytest.approx(total, rel=0.02)
    if active is not None:
        assert c.active == pytest.approx(active, rel=0.02)


def test_gpt_oss_active_excludes_embedding_in_openai_table() -> None:
    # OpenAI's model card: 20b 3.61B active, 120b 5.13B active, counting no embedding table
    for name, active in (("openai/gpt-oss-20b", 3.61e9), ("openai/gpt-oss-120b", 5.13e9)):
        c = param_counts(load_model(name))
        assert c.active - c.embedding == pytest.approx(active, rel=0.01)


def test_deepseek_v3_mla_attention_per_layer() -> None:
    # q_a 7168x1536 + q_a_norm 1536 + q_b 1536x(128*192) + kv_a 7168x576 + kv_a_norm 512
    # + kv_b 512x(128*256) + o 128*128x7168, 61 layers
    c = param_counts(load_model("deepseek-ai/DeepSeek-V3"))
    attn = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert c.attention == 61 * attn
    assert c.dense_mlp == 3 * 3 * 7168 * 18432  # first_k_dense_replace = 3
    assert c.experts == 58 * 256 * 3 * 7168 * 2048
    assert c.router == 58 * (256 * 7168 + 256)


def test_mixtral_active_is_two_of_eight_experts() -> None:
    c = param_counts(load_model("mistralai/Mixtral-8x7B-v0.1"))
    assert c.experts == 32 * 8 * 3 * 4096 * 14336
    assert c.active_experts == c.experts // 4


def test_llama2_7b_fp16_bytes_and_tp_shards() -> None:
    m = load_model("meta-llama/Llama-2-7b-hf")
    assert weight_bytes(m) == 2 * 6_738_415_616
    # tp=2: every matrix halves (32000 is a multiple of 64*2), norms stay whole
    norms = 2 * (32 * 2 * 4096 + 4096)
    assert weight_bytes_per_gpu(m, tp=2) == (2 * 6_738_415_616 - norms) // 2 + norms


def test_kv_heads_replicate_beyond_their_count() -> None:
    # Llama-3.1-8B has 8 KV heads: at tp=8 and tp=16 each GPU holds exactly one K and one V head
    m = load_model("meta-llama/Llama-3.1-8B")
    kv_one_head = 32 * 2 * 128 * 4096 * 2  # 32 layers, k+v, one head's rows, bf16
    norms = 2 * (32 * 2 * 4096 + 4096)
    sharded = weight_bytes(m) - 8 * kv_one_head - norms  # everything TP divides
    assert weight_bytes_per_gpu(m, tp=8) == sharded // 8 + kv_one_head + norms
    assert weight_bytes_per_gpu(m, tp=16) == sharded // 16 + kv_one_head + norms


def test_pipeline_split_follows_vllm() -> None:
    # vLLM get_pp_indices: 61 layers over 4 stages -> 15, 15, 16, 15 (extra before the last)
    assert [len(r) for r in pp_layer_ranges(61, 4)] == [15, 15, 16, 15]
    assert [len(r) for r in pp_layer_ranges(32, 2)] == [16, 16]
    m = load_model("meta-llama/Llama-3.1-8B")
    assert weight_bytes_per_gpu(m, pp=2) < weight_bytes_per_gpu(m)


def test_fp8_block_scales_deepseek_v3() -> None:
    # DeepSeek-V3's own quantization_config: fp8 with 128x128 fp32 block scales
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert m.weight_block_size == (128, 128)
    total = weight_bytes(m)
    assert total / 2**30 == pytest.approx(627, rel=0.01)  # ~ 671B x 1 byte + bf16 embeddings
    assert weight_bytes(m, quantization="fp8") == total


def test_mxfp4_only_converts_gpt_oss_experts() -> None:
    m = load_model("openai/gpt-oss-20b")
    c = param_counts(m)
    experts_w = 24 * 32 * 3 * 2880 * 2880  # gate_up (2x2880) + down, per expert
    expected = (c.total - experts_w) * 2 + experts_w // 2 + experts_w // 32
    assert weight_bytes(m) == expected
    assert weight_bytes(m, quantization="mxfp4") == expected


def test_awq_int4_with_group_scales() -> None:
    m = load_model("meta-llama/Llama-2-7b-hf")
    linear = 32 * (4 * 4096**2 + 3 * 4096 * 11008)
    # 0.5 byte/weight + fp16 scale and 4-bit zero per 128 inputs: 0.5 + 2.5/128 bytes
    groups = 32 * (4 * 4096 * 32 + 2 * 11008 * 32 + 4096 * 86)
    rest = 6_738_415_616 - linear
    assert weight_bytes(m, quantization="awq") == linear // 2 + groups * 2 + groups // 2 + 2 * rest


def test_active_bytes_moe_smaller() -> None:
    m = load_model("Qwen/Qwen3-30B-A3B")
    assert active_weight_bytes_per_gpu(m) < weight_bytes_per_gpu(m) // 5
    dense = load_model("Qwen/Qwen3-8B")
    assert active_weight_bytes_per_gpu(dense) == weight_bytes_per_gpu(dense)


def test_unknown_quantization() -> None:
    with pytest.raises(UnknownNameError, match="quantization"):
        weight_bytes(load_model("Qwen/Qwen3-8B"), quantization="int3")
    with pytest.raises(UnknownNameError, match="dtype"):
        weight_bytes(load_model("Qwen/Qwen3-8B"), dtype="int7")


def test_weight_memo_keys_on_the_format_the_caller_resolved() -> None:
    """A caller's resolved format (here none: plain 16-bit) is part of the memo key: the
    same model and flags priced with the checkpoint's fp8 blocks first must not answer it."""
    from kvplan.costs.memory.params import stage_weight_bytes, weight_bytes_per_gpu

    v3 = load_model("deepseek-ai/DeepSeek-V3")
    for fn in (weight_bytes_per_gpu, stage_weight_bytes):
        fp8 = fn(v3, tp=8)
        plain = fn(v3, tp=8, fmt=None)
        assert plain > 1.9 * fp8  # bf16 values: twice fp8's bytes, less the block scales
        assert fn(v3, tp=8) == fp8
