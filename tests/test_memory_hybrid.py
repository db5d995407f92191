"""Hybrid attention + state models (Qwen3-Next, Nemotron-H) against vLLM 0.11's arithmetic.

Every expected value is computed here from vLLM's own formulas:

- state shapes: ``vllm/model_executor/layers/mamba/mamba_utils.py``
  ``MambaStateShapeCalculator.gated_delta_net_state_shape`` / ``mamba2_state_shape``
  (with ``extra_groups_for_head_shards``); dtypes: ``MambaStateDtypeCalculator``
- state page: ``vllm/v1/kv_cache_interface.py`` ``MambaSpec.page_size_bytes`` (sum of
  prod(shape) x dtype size, or ``page_size_padded``); one page per request
  (mamba block_size = max_model_len)
- attention block: ``vllm/model_executor/models/config.py``
  ``HybridAttentionMambaModelConfig.verify_and_update_config``:
  ``16 * cdiv(mamba_page, 16 * attn_page_size_1_token)``, raised over a smaller --block-size,
  state page padded to ``block * attn_page_size_1_token``
- groups, blocks, tokens, concurrency: ``vllm/v1/core/kv_cache_utils.py``
  (``_get_kv_cache_groups_uniform_page_size``, ``get_num_blocks``,
  ``_report_kv_cache_config``: num_blocks // groups * min block size,
  ``get_max_concurrency_for_kv_cache_config``)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.costs.memory.plan import (
    build_groups,
    hybrid_block,
    layer_specs,
    plan_memory,
    resolve_settings,
)
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.kv import StateSpec, kv_spec
from kvplan.specs.model import MambaSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB, cdiv

H200 = load_gpu("H200")
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
NEMOTRON_H = "nvidia/Nemotron-H-56B-Base-8K"
AVAIL = 40 * GiB
BF16 = 2
ALIGN = 16  # HybridAttentionMambaModelConfig: FlashAttention block sizes are multiples of 16


def _qwen3_next(tp: int) -> dict[str, int]:
    """Qwen3-Next-80B-A3B: 48 layers, every 4th full attention (2 KV heads x 256), the other 36
    Gated DeltaNet (16 key heads x 128, 32 value heads x 128, conv kernel 4), bf16."""
    attn_1_token = 2 * max(1, 2 // tp) * 256 * BF16  # FullAttentionSpec(block_size=1).page
    conv = (128 * 16 * 2 + 128 * 32) // tp * (4 - 1)  # (conv_kernel - 1, conv_dim / tp)
    recurrent = 32 // tp * 128 * 128  # (num_v_heads / tp, head_k_dim, head_v_dim)
    state_page = (conv + recurrent) * BF16  # gated_delta_net_state_dtype: both model dtype
    block = ALIGN * cdiv(state_page, ALIGN * attn_1_token)
    page = block * attn_1_token  # mamba_page_size_padded
    layers_per_group = 12  # min(36, 12) = 12: 3 state groups + 1 full
    num_blocks = AVAIL // page // layers_per_group
    max_model_len = 262_144  # max_position_embeddings
    pages = cdiv(max_model_len, block) + 3 * 1  # full group + one state page per state group
    return {
        "block": block,
        "state_page": state_page,
        "page": page,
        "num_blocks": num_blocks,
        "tokens": num_blocks // 4 * min(block, max_model_len),
        "pages": pages,
    }


def _nemotron_h(tp: int) -> dict[str, int]:
    """Nemotron-H-56B: 118 layers = 54 Mamba2 ('M') + 10 attention ('*', 8 KV heads x 128)
    + 54 MLP ('-', no cache). Mamba2: 256 heads x 64, 8 groups, state 256, conv kernel 4."""
    attn_1_token = 2 * (8 // tp) * 128 * BF16
    n_groups = 8  # tp 1, 2 divide it: no extra_groups_for_head_shards
    conv = (256 * 64 + 2 * n_groups * 256) // tp * (4 - 1)
    ssm = 256 // tp * 64 * 256  # (num_heads / tp, head_dim, state_size)
    state_page = (conv + ssm) * BF16  # mamba2_state_dtype, mamba_ssm_cache_dtype 'auto'
    block = ALIGN * cdiv(state_page, ALIGN * attn_1_token)
    page = block * attn_1_token
    layers_per_group = 10  # min(54, 10); 54 >= 12.5: cdiv(54, 10) = 6 state groups + 1 full
    num_blocks = AVAIL // page // layers_per_group
    max_model_len = 8192
    return {
        "block": block,
        "state_page": state_page,
        "page": page,
        "num_blocks": num_blocks,
        "tokens": num_blocks // 7 * min(block, max_model_len),
        "pages": cdiv(max_model_len, block) + 6 * 1,
    }


@pytest.mark.parametrize(
    ("tp", "block", "page"),
    [(1, 544, 544 * 2048), (2, 544, 544 * 1024), (4, 272, 272 * 1024)],
)
def test_qwen3_next_exact(tp: int, block: int, page: int) -> None:
    want = _qwen3_next(tp)
    assert (want["block"], want["page"]) == (block, page)  # the formulas, spelled out above
    p = plan_memory(
        load_model(QWEN3_NEXT),
        H200,
        EngineConfig(tensor_parallel_size=tp, kv_cache_memory_bytes=AVAIL),
    )
    assert p.block_size == block and p.page_size_bytes == page
    assert p.hybrid is not None
    assert p.hybrid.state_page_bytes == want["state_page"]
    assert p.hybrid.page_size_padded == page
    assert (len(p.groups), p.layers_per_group, p.num_padding_layers) == (4, 12, 0)
    assert [g.spec.kind for g in p.groups].count("state") == 3
    assert {g.page_size_bytes for g in p.groups} == {page}
    assert p.num_blocks == want["num_blocks"]
    assert p.kv_cache_tokens == want["tokens"]
    assert p.pages_per_request == want["pages"]
    assert p.max_concurrency == want["num_blocks"] / want["pages"]


def test_qwen3_next_tp1_numbers() -> None:
    # 40 GiB: 42,949,672,960 // 1,114,112 // 12 = 3212 blocks; 3212 // 4 x 544 tokens
    p = plan_memory(load_model(QWEN3_NEXT), H200, EngineConfig(kv_cache_memory_bytes=AVAIL))
    assert (p.num_blocks, p.kv_cache_tokens, p.pages_per_request) == (3212, 436_832, 485)
    assert f"{p.max_concurrency:.2f}" == "6.62"
    assert p.hybrid is not None  # padded 1,114,112 over the 1,097,728-byte state
    assert f"{p.hybrid.padding_pct:.2f}" == "1.49"


@pytest.mark.parametrize("tp", [1, 2])
def test_nemotron_h_exact(tp: int) -> None:
    want = _nemotron_h(tp)
    assert want["block"] == 2080  # 16 x cdiv(8,511,488 / tp, 16 x 4096 / tp) = 16 x 130
    p = plan_memory(
        load_model(NEMOTRON_H),
        H200,
        EngineConfig(tensor_parallel_size=tp, kv_cache_memory_bytes=AVAIL),
    )
    assert p.block_size == want["block"] and p.page_size_bytes == want["page"]
    assert p.hybrid is not None and p.hybrid.state_page_bytes == want["state_page"]
    assert (len(p.groups), p.layers_per_group, p.num_padding_layers) == (7, 10, 6)
    assert sorted(len(g.layer_ids) for g in p.groups) == [9] * 6 + [10]
    assert p.num_blocks == want["num_blocks"]
    assert p.kv_cache_tokens == want["tokens"]
    assert p.pages_per_request == want["pages"] == 4 + 6
    assert p.max_concurrency == want["num_blocks"] / 10


def test_nemotron_h_tp1_numbers() -> None:
    # page 2080 x 4096 = 8,519,680; 40 GiB // page // 10 = 504; 504 // 7 x 2080 = 149,760
    p = plan_memory(load_model(NEMOTRON_H), H200, EngineConfig(kv_cache_memory_bytes=AVAIL))
    assert (p.page_size_bytes, p.num_blocks, p.kv_cache_tokens) == (8_519_680, 504, 149_760)
    assert p.max_concurrency == 50.4


def test_max_model_len_below_attention_block_sets_tokens() -> None:
    # _report_kv_cache_config takes the smallest group block size; state groups' block is
    # max_model_len (one page per request), so 1024 < 2080 counts 1024 tokens per block
    p = plan_memory(
        load_model(NEMOTRON_H), H200, EngineConfig(max_model_len=1024, kv_cache_memory_bytes=AVAIL)
    )
    assert p.block_size == 2080
    assert p.kv_cache_tokens == 504 // 7 * 1024
    assert p.pages_per_request == cdiv(1024, 2080) + 6


def test_user_block_size_is_raised_not_kept() -> None:
    # --block-size 128 < 544: vLLM overrides it with the aligned block ("Setting attention
    # block size to 544 tokens")
    p = plan_memory(
        load_model(QWEN3_NEXT), H200, EngineConfig(block_size=128, kv_cache_memory_bytes=AVAIL)
    )
    assert p.block_size == 544


def test_larger_user_block_is_kept_and_state_padded_to_it() -> None:
    # block sizes above the aligned one stay (the state page is padded to block x bytes/token)
    model = load_model(NEMOTRON_H)
    s = resolve_settings(model, H200, EngineConfig(kv_cache_memory_bytes=AVAIL))
    specs = [sp for _, sp in layer_specs(model, s)]
    hb = hybrid_block(specs, 4096)
    assert hb is not None
    assert (hb.block_size, hb.aligned_block_size, hb.page_size_padded) == (4096, 2080, 4096 * 4096)


def test_fp8_kv_cache_halves_attention_only() -> None:
    # --kv-cache-dtype fp8 shrinks attn_page_size_1_token to 1 KiB; the state stays bf16
    # (mamba_cache_dtype 'auto' = model dtype): block = 16 x cdiv(1,097,728, 16 x 1024) = 1072
    p = plan_memory(
        load_model(QWEN3_NEXT),
        H200,
        EngineConfig(kv_cache_dtype="fp8", kv_cache_memory_bytes=AVAIL),
    )
    assert p.block_size == 16 * cdiv(1_097_728, 16 * 1024) == 1072
    assert p.page_size_bytes == 1072 * 1024


def test_mamba_ssm_cache_dtype_float32_only_widens_the_ssm_state() -> None:
    # mamba2_state_dtype: conv in mamba_cache_dtype (bf16), SSM in mamba_ssm_cache_dtype
    model = load_model(NEMOTRON_H)
    s = resolve_settings(model, H200, EngineConfig(kv_cache_memory_bytes=AVAIL))
    s = replace(s, mamba_ssm_cache_dtype="float32")
    specs = layer_specs(model, s)
    state = next(sp for _, sp in specs if isinstance(sp, StateSpec))
    conv, ssm = (256 * 64 + 2 * 8 * 256) * 3, 256 * 64 * 256
    assert (state.conv_bytes, state.temporal_bytes) == (conv * 2, ssm * 4)
    groups = build_groups(specs, s.block_size, s.max_model_len)
    assert groups[-1].block_size == 16 * cdiv(conv * 2 + ssm * 4, 16 * 4096) == 4128


def test_gated_delta_net_ignores_ssm_dtype_in_vllm_011() -> None:
    # gated_delta_net_state_dtype(model_dtype, mamba_cache_dtype) -> (state, state)
    model = load_model(QWEN3_NEXT)
    auto = kv_spec(model).state_bytes_per_request
    assert kv_spec(model, mamba_ssm_cache_dtype="float32").state_bytes_per_request == auto
    assert kv_spec(model, mamba_cache_dtype="float32").state_bytes_per_request == 2 * auto


def test_extra_groups_for_head_shards() -> None:
    # n_groups % tp != 0: n_groups += tp - n_groups (so n_groups = tp, one group per GPU)
    m = MambaSpec(num_heads=128, head_dim=64, state_size=128, n_groups=20, conv_kernel=4)
    assert m.sharded_groups(4) == 20
    assert m.sharded_groups(8) == 8
    assert m.conv_elements(8) == (128 * 64 + 2 * 8 * 128) // 8 * 3
    nemotron = load_model(NEMOTRON_H).mamba
    assert nemotron is not None
    assert nemotron.conv_elements(16) == (256 * 64 + 2 * 16 * 256) // 16 * 3


def test_state_spec_page_is_padded_only_in_the_plan() -> None:
    # kv_spec describes the model: unpadded state; the plan pads it to the attention page
    model = load_model(QWEN3_NEXT)
    state = next(g.spec for g in kv_spec(model).groups if isinstance(g.spec, StateSpec))
    assert state.page_size_bytes(16) == state.state_bytes == 1_097_728
    assert state.page_size_padded is None


# vLLM issue-era startup log, Qwen3-Next-80B-A3B-Instruct (same cache geometry as -Thinking),
# 2 x H200, vLLM 0.10.2 (same hybrid arithmetic as 0.11.0), default flags:
#   "Setting attention block size to 544 tokens", "Padding mamba page size by 1.49%",
#   "Available KV cache memory: 44.59 GiB", "GPU KV cache size: 973,760 tokens",
#   "Maximum concurrency for 262,144 tokens per request: 14.77x"
# Source: a public log in the search index (file id 7292846353; LegalAI-DataPipeline user's
# `python -m vllm.entrypoints.openai.api_server ... --tensor-parallel-size 2`).
def test_qwen3_next_tp2_real_log() -> None:
    page = 544 * 1024  # 1 KV head x 256 x (K,V) x bf16 per token at TP 2
    avail = 7162 * 12 * page + 5 * page  # any byte count in [7162, 7163) blocks of 12 pages
    assert f"{avail / GiB:.2f}" == "44.59"
    p = plan_memory(
        load_model(QWEN3_NEXT),
        H200,
        EngineConfig(tensor_parallel_size=2, kv_cache_memory_bytes=avail),
    )
    assert p.block_size == 544
    assert p.hybrid is not None and f"{p.hybrid.padding_pct:.2f}" == "1.49"
    assert p.num_blocks == 7162
    assert p.kv_cache_tokens == 7162 // 4 * 544 == 973_760
    assert p.pages_per_request == cdiv(262_144, 544) + 3 == 485
    assert f"{p.max_concurrency:.2f}" == "14.77"
