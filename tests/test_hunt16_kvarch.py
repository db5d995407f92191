"""Hunt 16 (kvarch): bytes per token and vLLM 0.11's KV pages for newer architectures, read
from their public config.json values (configs not in the bundled catalog are built here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.specs.catalog import load_model
from tests.conftest import assert_one_line_error, run_cli


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _kimi_k2(tmp_path: Path) -> str:
    """moonshotai/Kimi-K2-Instruct config.json (the fields kvplan reads): DeepSeek-V3's MLA
    with 64 heads and 384 experts, and ``num_nextn_predict_layers: 0`` (no MTP layer)."""
    return _write(tmp_path, "kimi-k2", {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
        "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 64,
        "num_key_value_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "intermediate_size": 18432, "first_k_dense_replace": 1,
        "num_nextn_predict_layers": 0, "vocab_size": 163840, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False,
        "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                         "type": "yarn"}})


def test_counts_a_config_sets_to_zero_are_read_as_zero(tmp_path: Path) -> None:
    # Kimi-K2 says num_nextn_predict_layers 0; MiniMax-M2 shared_intermediate_size 0; a
    # DeepSeek-style model with every layer MoE says first_k_dense_replace 0 (DeepseekV2Config
    # default is 0). kvplan refused each: "must be positive, got 0". KV: 61 layers x (512 +
    # 64) latent x 2 B = 70,272 B/token.
    path = _kimi_k2(tmp_path)
    r = run_cli("kv", path, "--json")
    assert r.code == 0, r.err
    assert r.json()["bytes_per_token"] == 61 * 576 * 2 == 70_272
    model = load_model(path)
    assert model.num_mtp_layers == 0 and model.moe is not None
    assert model.moe.shared_expert_intermediate_size == 1 * 2048
    cfg = json.loads(Path(path).read_text())
    cfg.update(first_k_dense_replace=0, n_shared_experts=0)
    zero = load_model(_write(tmp_path, "kimi-zero", cfg))
    assert zero.moe is not None
    assert (zero.moe.first_dense_layers, zero.moe.shared_expert_intermediate_size) == (0, 0)
    cfg["first_k_dense_replace"] = -1
    bad = run_cli("kv", _write(tmp_path, "kimi-bad", cfg))
    assert bad.code == 2 and "must be positive" in bad.err


def _minimax_m2(tmp_path: Path, attn_types: list[int]) -> str:
    """MiniMaxAI/MiniMax-M2 config.json (the fields kvplan reads): 62 layers, 48 query / 8 KV
    heads of 128, 256 experts (top 8), ``shared_intermediate_size: 0`` and an
    ``attn_type_list`` of 62 ones (every layer softmax attention)."""
    return _write(tmp_path, "minimax-m2", {
        "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
        "hidden_size": 3072, "num_hidden_layers": 62, "num_attention_heads": 48,
        "num_key_value_heads": 8, "head_dim": 128, "rotary_dim": 64, "intermediate_size": 1536,
        "num_local_experts": 256, "num_experts_per_tok": 8, "shared_intermediate_size": 0,
        "attn_type_list": attn_types, "max_position_embeddings": 196608, "vocab_size": 200064,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rope_theta": 5000000})


def test_minimax_m2_all_softmax_attn_type_list_is_plain_attention(tmp_path: Path) -> None:
    # vLLM minimax_m2.py builds every layer as Attention (attn_type_list is not read): 2 (K, V)
    # x 62 layers x 8 KV heads x 128 x 2 B = 253,952 B/token. kvplan refused the file ("has
    # Mamba / linear-attention layers laid out by attn_type_list").
    r = run_cli("kv", _minimax_m2(tmp_path, [1] * 62), "--json")
    assert r.code == 0, r.err
    assert r.json()["bytes_per_token"] == 2 * 62 * 8 * 128 * 2 == 253_952
    assert [g["kind"] for g in r.json()["groups"]] == ["full"]
    # MiniMax-M1 / Text-01 layers marked 0 are lightning attention (a state kvplan does not
    # model): still refused, in one line naming the field and the count.
    m1 = run_cli("kv", _minimax_m2(tmp_path, ([0] * 7 + [1]) * 7 + [1] * 6))
    assert_one_line_error(m1)
    assert "attn_type_list" in m1.err and "49 layers 0" in m1.err
