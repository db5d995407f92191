"""Hunt 15, KV bytes per token and page sizes (kvplan kv / request against vLLM 0.11's
kv_cache_interface.py arithmetic): regressions."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.analysis.kv_view import kv_report
from kvplan.analysis.timeline import request_timeline
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import kv_spec
from tests.conftest import run_cli
from tests.test_hunt14_mla import _v32_config


def test_kv_pages_deepseek_v32_in_the_blocks_of_64_vllm_forces_on_every_gpu(
        tmp_path: Path) -> None:
    # vLLM 0.11 platforms/cuda.py: sparse MLA (index_topk) -> "Forcing kv cache block size
    # to 64 for FlashMLASparse backend." whatever --block-size and GPU (capacity does so).
    # One layer's page: 64 tokens x (656 B fp8_ds_mla latent + 128 + 128 // 128 x 4 = 132 B
    # indexer key) = 64 x 788 = 50,432 B. kvplan kv paged it in blocks of 16: 12,608 B.
    report = kv_report(_v32_config(tmp_path))
    assert report.block_size == 64
    assert report.to_json()["groups"][0]["page_size_bytes"] == 64 * (656 + 132) == 50_432
    result = run_cli("kv", _v32_config(tmp_path), "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["block_size"] == 64
    assert "blocks of 64" in result.err


def test_request_claims_deepseek_v32_blocks_of_64(tmp_path: Path) -> None:
    # 100-token prompt, its prefill step: cdiv(100, 64) = 2 blocks per layer, 2 x 50,432 B x 61
    # layers = 6,152,704 B allocated (in blocks of 16: 7 x 12,608 x 61 = 5,383,616 B).
    kv = kv_spec(load_model(_v32_config(tmp_path)))
    tl = request_timeline(kv, 100, 1)  # steps[0]: the prefill step
    assert tl.block_size == 64
    assert tl.steps[0].allocated_blocks == 2
    assert tl.steps[0].allocated_bytes == 2 * 64 * 788 * 61 == 6_152_704


def test_kv_says_mla_pages_are_forced_to_64_or_128_where_no_block_size_is_given() -> None:
    # kvplan kv DeepSeek-V3 prints pages of 16 tokens x 1,152 B = 18,432 B per layer; vLLM
    # 0.11 runs 64 x 1,152 = 73,728 B on an H100 (FlashMLA) and 128 x 1,152 = 147,456 B on a
    # B200 (CUTLASS MLA). request said so; kv printed the 16-token page silently.
    result = run_cli("kv", "deepseek-ai/DeepSeek-V3")
    assert result.code == 0, result.err
    assert "forces 64 on Hopper" in result.err and "128 on Blackwell" in result.err
    given = run_cli("kv", "deepseek-ai/DeepSeek-V3", "--block-size", "64")
    assert given.code == 0 and "forces" not in given.err


def _granite_4_h(tmp_path: Path, experts: int) -> str:
    """An ibm-granite/granite-4.0-h-tiny-shaped config.json (GraniteMoeHybridConfig's names:
    ``layer_types`` of "mamba" / "attention", Mamba2 sizes as ``mamba_n_heads``,
    ``mamba_d_head``, ``mamba_d_state``, ``mamba_n_groups``, ``mamba_d_conv``,
    ``mamba_expand``); ``experts`` 0 is how the dense Granite-4.0 models say "no MoE"."""
    types = ["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)]
    cfg = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
           "hidden_size": 1536, "num_hidden_layers": 40, "num_attention_heads": 12,
           "num_key_value_heads": 4, "layer_types": types, "mamba_n_heads": 48,
           "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
           "mamba_expand": 2, "vocab_size": 100352, "intermediate_size": 512,
           "shared_intermediate_size": 1024, "num_local_experts": experts,
           "num_experts_per_tok": 6 if experts else 0, "max_position_embeddings": 131072,
           "position_embedding_type": "nope", "torch_dtype": "bfloat16"}
    path = tmp_path / f"granite-{experts}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_granite_4_h_state_and_kv_are_read_from_its_own_field_names(tmp_path: Path) -> None:
    # vLLM granitemoehybrid.py: mamba2_state_shape(intermediate = mamba_expand x hidden =
    # 3,072, n_groups 1, heads 48, head_dim 64, state 128, conv 4):
    #   conv (4 - 1) x (3,072 + 2 x 1 x 128) = 9,984; ssm 48 x 64 x 128 = 393,216 values;
    #   bf16: (9,984 + 393,216) x 2 = 806,400 B per Mamba layer, x 36 = 29,030,400 B/request.
    # Attention: 4 layers x 2 x 4 KV heads x 128 x 2 B = 8,192 B/token; block 16 x
    # cdiv(806,400, 16 x 2,048) = 400, page 400 x 2,048 = 819,200 B.
    # kvplan refused it: "field 'mamba_num_heads' ... is missing" (Nemotron-H's name).
    report = kv_report(_granite_4_h(tmp_path, 64))
    assert report.whole.bytes_per_token == 8_192
    assert report.whole.state_bytes_per_request == 36 * 806_400 == 29_030_400
    assert report.block_size == 400
    assert {g["page_size_bytes"] for g in report.to_json()["groups"]} == {819_200}
    spec = load_model(_granite_4_h(tmp_path, 64))
    assert spec.moe is not None and spec.moe.shared_expert_intermediate_size == 1024


def test_granite_4_dense_zero_experts_is_not_refused(tmp_path: Path) -> None:
    # granite-4.0-h-micro says num_local_experts 0 (a dense MLP); kvplan refused the file
    # ("field 'num_local_experts' ...: must be positive, got 0"). Its KV is the tiny's.
    spec = load_model(_granite_4_h(tmp_path, 0))
    assert spec.moe is None
    assert kv_spec(spec).bytes_per_token == 8_192
