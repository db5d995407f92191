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
    del cfg["moe_intermediate_size"]  # 0 shared experts need no shared-expert width
    assert load_model(_write(tmp_path, "kimi-zero2", cfg)).moe is not None
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


def _mamba_codestral(tmp_path: Path) -> str:
    """mistralai/Mamba-Codestral-7B-v0.1 config.json (transformers Mamba2Config names: no
    attention, 64 Mamba2 layers of 128 heads x 64, state 128, 8 groups, conv kernel 4; no
    max_position_embeddings)."""
    return _write(tmp_path, "mamba-codestral", {
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 4096,
        "num_hidden_layers": 64, "num_heads": 128, "head_dim": 64, "state_size": 128,
        "n_groups": 8, "expand": 2, "conv_kernel": 4, "chunk_size": 256, "vocab_size": 32768,
        "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rms_norm": True,
        "use_bias": False, "use_conv_bias": True})


def test_pure_mamba2_holds_a_state_per_request_not_kv_per_token(tmp_path: Path) -> None:
    # vLLM mamba2.py (MambaStateShapeCalculator.mamba2_state_shape, intermediate = expand x
    # hidden = 8192): conv (4 - 1) x (8192 + 2 x 8 x 128) = 30,720, ssm 128 x 64 x 128 =
    # 1,048,576 values, x 2 B = 2,158,592 B per layer, x 64 = 138,149,888 B per request and
    # 0 B per token. kvplan read num_heads as attention heads and priced 64 full-attention
    # layers: 2 x 64 x 128 x 64 x 2 = 2,097,152 B/token.
    path = _mamba_codestral(tmp_path)
    r = run_cli("kv", path, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["bytes_per_token"] == 0
    assert doc["state_bytes_per_request"] == 64 * (30_720 + 1_048_576) * 2 == 138_149_888
    assert [g["kind"] for g in doc["groups"]] == ["state"]
    tp2 = run_cli("kv", path, "-tp", "2", "--json").json()  # conv 15,360 + ssm 524,288
    assert tp2["state_bytes_per_request_per_gpu"] == 64 * (15_360 + 524_288) * 2
    # One Mamba2 block per layer (no MLP): in_proj (2 x 8192 + 2 x 8 x 128 + 128) x 4096,
    # out_proj 4096 x 8192, conv 10,240 x 4 + bias, 3 x 128 + 8192 vectors; + embedding and
    # lm_head 32768 x 4096 each and 65 norms of 4096: 7,285,403,648 (Mamba-Codestral, 7.3B).
    from kvplan.costs.memory.params import param_counts

    counts = param_counts(load_model(path))
    assert counts.dense_mlp == 0 and counts.attention == 0
    assert counts.total == 7_285_403_648


def test_pure_mamba2_capacity_is_vllms(tmp_path: Path) -> None:
    # vLLM 0.11: one MambaSpec group of 64 layers, block = mamba_block_size = max_model_len
    # (2048: no length key in the config), page 2,158,592 B. num_blocks = 10 GiB // page //
    # 64 = 4,974 // 64 = 77; GPU KV cache size = 77 // 1 group x 2048 = 157,696 tokens; max
    # concurrency 77 / cdiv(64 x 1 page, 64 pages) = 77.00x.
    r = run_cli("capacity", _mamba_codestral(tmp_path), "--kv-cache-memory", "10GiB", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (77, 157_696)
    assert doc["max_concurrency"] == 77.0


def test_a_config_without_a_length_key_serves_the_max_model_len_given(tmp_path: Path) -> None:
    # vLLM 0.11 _get_and_verify_max_len: no length key in config.json (Mamba-Codestral has
    # none) -> "If max_model_len is specified, we use it"; only without one does it assume
    # 2,048. kvplan refused --max-model-len 32768 ("exceeds the model's derived max_model_len
    # 2048"). Blocks of max_model_len for the Mamba2 group: 77 x 32,768 = 2,523,136 tokens.
    path = _mamba_codestral(tmp_path)
    r = run_cli("capacity", path, "--kv-cache-memory", "10GiB", "--max-model-len", "32768",
                "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (77, 77 * 32_768)
    assert doc["max_concurrency"] == 77.0
    # A config that states its length still caps --max-model-len at it.
    cfg = json.loads(Path(path).read_text())
    cfg["max_position_embeddings"] = 2048
    capped = run_cli("capacity", _write(tmp_path, "capped", cfg), "--max-model-len", "32768")
    assert_one_line_error(capped)
    assert "exceeds the model's derived max_model_len 2048" in capped.err


def test_per_layer_block_configs_and_mamba1_are_refused_not_mispriced(tmp_path: Path) -> None:
    # nvidia/Llama-3_3-Nemotron-Super-49B-v1 (model_type nemotron-nas): no num_key_value_heads,
    # each layer's block_configs[i].attention gives n_heads_in_group (64 // 8 = 8 KV heads) or
    # no_op (no attention, no cache: vLLM nemotron_nas.py). kvplan priced 80 MHA layers of 64
    # KV heads: 2 x 80 x 64 x 128 x 2 = 2,621,440 B/token, ~20x the real cache.
    blocks = [{"attention": {"n_heads_in_group": None if i % 3 == 2 else 8,
                             "no_op": i % 3 == 2, "replace_with_linear": False},
               "ffn": {"ffn_mult": 5.25, "no_op": False, "replace_with_linear": False}}
              for i in range(80)]
    nas = _write(tmp_path, "nemotron-nas", {
        "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
        "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
        "num_key_value_heads": None, "block_configs": blocks, "vocab_size": 128256,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16"})
    r = run_cli("kv", nas)
    assert_one_line_error(r)
    assert "block_configs" in r.err
    # state-spaces/mamba-130m-hf (model_type mamba): kvplan said "num_attention_heads is
    # missing; it is required to size the KV cache", as if the file were broken.
    mamba = _write(tmp_path, "mamba-130m", {
        "architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 768,
        "num_hidden_layers": 24, "state_size": 16, "conv_kernel": 4, "expand": 2,
        "intermediate_size": 1536, "time_step_rank": 48, "vocab_size": 50280})
    r = run_cli("kv", mamba)
    assert_one_line_error(r)
    assert "Mamba (v1)" in r.err and "num_attention_heads" not in r.err


def _llama4_scout(tmp_path: Path, layer_types: bool) -> str:
    """meta-llama/Llama-4-Scout-17B-16E-Instruct config.json's text_config (48 layers, 8 KV
    heads of 128, attention_chunk_size 8192, every 4th layer global); ``layer_types`` as
    transformers' Llama4TextConfig writes it when a checkpoint is saved again (quantized
    derivatives): "chunked_attention" for the rope layers, "full_attention" for the others."""
    text: dict[str, Any] = {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "attention_chunk_size": 8192, "vocab_size": 202048, "intermediate_size": 8192,
        "intermediate_size_mlp": 16384, "num_local_experts": 16, "num_experts_per_tok": 1,
        "max_position_embeddings": 10485760, "torch_dtype": "bfloat16",
        "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    if layer_types:
        text["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "chunked_attention"
                               for i in range(48)]
    return _write(tmp_path, f"llama4-{layer_types}", {
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "text_config": text, "torch_dtype": "bfloat16"})


def test_llama4_chunked_attention_layer_types_are_cached_as_full(tmp_path: Path) -> None:
    # vLLM 0.11 disables the hybrid KV cache manager for chunked local attention by default
    # ("There is a latency regression when using chunked local attention with the hybrid KV
    # cache manager. Disabling it, by default.") and unify_hybrid_kv_cache_specs turns each
    # ChunkedLocalAttentionSpec into a FullAttentionSpec: 2 x 48 x 8 x 128 x 2 = 196,608
    # B/token, one group. kvplan refused a config listing "chunked_attention" in layer_types.
    for listed in (False, True):
        r = run_cli("kv", _llama4_scout(tmp_path, listed), "--json")
        assert r.code == 0, r.err
        doc = r.json()
        assert doc["bytes_per_token"] == 2 * 48 * 8 * 128 * 2 == 196_608
        assert [(g["kind"], g["num_layers"]) for g in doc["groups"]] == [("full", 48)]
        assert any("cached as full attention" in n for n in doc["notes"])


def test_bamba_attention_indices_make_a_hybrid(tmp_path: Path) -> None:
    # An ibm-ai-platform/Bamba-9B-shaped config: 32 layers, attention at attn_layer_indices
    # [9, 18, 27] (8 KV heads x 128), Mamba2 elsewhere (128 heads x 64, state 128, 1 group,
    # conv 4; vLLM bamba.py). kvplan refused it ("laid out by attn_layer_indices").
    # State: 3 x (8192 + 2 x 128) = 25,344 conv + 128 x 64 x 128 = 1,048,576 ssm, x 2 B =
    # 2,147,840 B; attention 2 x 8 x 128 x 2 = 4,096 B/token/layer -> block 16 x
    # cdiv(2,147,840, 16 x 4,096) = 528, page 528 x 4,096 = 2,162,688 B. Groups of 3: 10 of
    # the 29 Mamba layers (1 padding) + 1 attention = 11. 10 GiB // page // 3 = 1,654 blocks;
    # 1,654 // 11 x 528 = 79,200 tokens; cdiv(32768, 528) = 63 + 10 state pages per request:
    # 1,654 / 73 = 22.66x.
    path = _write(tmp_path, "bamba", {
        "architectures": ["BambaForCausalLM"], "model_type": "bamba", "hidden_size": 4096,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "attn_layer_indices": [9, 18, 27], "mamba_n_heads": 128, "mamba_d_head": 64,
        "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
        "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16"})
    r = run_cli("capacity", path, "--kv-cache-memory", "10GiB", "--max-model-len", "32768",
                "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (1654, 79_200)
    assert round(doc["max_concurrency"], 2) == 22.66
    kinds = load_model(path).layer_kinds
    assert [i for i, k in enumerate(kinds) if k == "full"] == [9, 18, 27]
    bad = json.loads(Path(path).read_text())
    bad["attn_layer_indices"] = [9, 32]
    r = run_cli("kv", _write(tmp_path, "bamba-bad", bad))
    assert_one_line_error(r)
    assert "attn_layer_indices" in r.err


def test_a_layer_type_kvplan_does_not_model_is_named_not_called_invalid(tmp_path: Path) -> None:
    # LiquidAI/LFM2-1.2B-shaped layer_types: "conv" (short-convolution state layers, vLLM
    # Lfm2ForCausalLM) and "full_attention". kvplan said the field "must list one of [...]
    # per layer", as if the config were malformed.
    types = ["conv", "conv", "full_attention"] * 5 + ["conv"]
    path = _write(tmp_path, "lfm2", {
        "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048,
        "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "layer_types": types, "vocab_size": 65536, "torch_dtype": "bfloat16"})
    r = run_cli("kv", path)
    assert_one_line_error(r)
    assert "lists 'conv' layers, which kvplan does not model" in r.err


def test_minicpm3_kv_lora_rank_is_not_mla_in_vllm(tmp_path: Path) -> None:
    # openbmb/MiniCPM3-4B has kv_lora_rank 256 but model_type minicpm3, which vLLM 0.11's
    # is_deepseek_mla does not list: minicpm3.py builds a plain Attention over every head with
    # K of qk_nope + qk_rope = 64 + 32 = 96 and V padded to 96, so 2 x 62 layers x 40 heads x
    # 96 x 2 B = 952,320 B/token. kvplan cached an MLA latent: 62 x (256 + 32) x 2 = 35,712.
    cfg = {"architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3",
           "hidden_size": 2560, "num_hidden_layers": 62, "num_attention_heads": 40,
           "num_key_value_heads": 40, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
           "v_head_dim": 64, "kv_lora_rank": 256, "q_lora_rank": 768, "intermediate_size": 6400,
           "vocab_size": 73448, "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}
    r = run_cli("kv", _write(tmp_path, "minicpm3", cfg), "--json")
    assert r.code == 0, r.err
    assert r.json()["bytes_per_token"] == 2 * 62 * 40 * 96 * 2 == 952_320
    assert [g["kind"] for g in r.json()["groups"]] == ["full"]
    # A family vLLM does not run as MLA, with a kv_lora_rank: refused, not guessed.
    other = run_cli("kv", _write(tmp_path, "other", {**cfg, "model_type": "acme_lm"}))
    assert_one_line_error(other)
    assert "kv_lora_rank" in other.err and "'acme_lm'" in other.err
    # Kimi-K2 (kimi_k2) stays MLA: 61 x 576 x 2 = 70,272 B/token.
    assert run_cli("kv", _kimi_k2(tmp_path), "--json").json()["bytes_per_token"] == 70_272


def test_sliding_layer_types_without_a_window_are_full_attention(tmp_path: Path) -> None:
    # vLLM gpt_oss.py / gemma3.py give a "sliding_attention" layer config.sliding_window,
    # and a window of None is full attention (FullAttentionSpec). gpt-oss-20b with
    # sliding_window null: 24 full layers x 8 KV heads x 64 x 2 (K, V) x 2 B = 49,152 B/token.
    # kvplan refused: "sliding_window is missing; it is required to size the KV cache" (its
    # interleaved families without layer_types already read a null window as full).
    cfg = json.loads(Path(str(_catalog_file("openai--gpt-oss-20b.json"))).read_text())
    cfg["sliding_window"] = None
    r = run_cli("kv", _write(tmp_path, "gpt-oss-no-window", cfg), "--json")
    assert r.code == 0, r.err
    assert r.json()["bytes_per_token"] == 24 * 8 * 64 * 2 * 2 == 49_152
    assert [(g["kind"], g["num_layers"]) for g in r.json()["groups"]] == [("full", 24)]
    # Absent is not null: GptOssConfig's default window is 128, so 12 sliding + 12 full layers
    # (kvplan refused: "sliding_window is missing").
    del cfg["sliding_window"]
    absent = run_cli("kv", _write(tmp_path, "gpt-oss-default-window", cfg), "--json")
    assert absent.code == 0, absent.err
    groups = [(g["kind"], g["num_layers"]) for g in absent.json()["groups"]]
    assert sorted(groups) == [("full", 12), ("sliding", 12)]
    assert "window 128" in absent.json()["formula"][0]


def _catalog_file(name: str) -> Any:
    from importlib import resources

    return resources.files("kvplan.specs.catalog") / "models" / name


def test_request_and_batch_take_any_length_where_the_config_states_none(tmp_path: Path) -> None:
    # Same rule for kvplan request / batch: Mamba-Codestral names no context, so a 5,000-token
    # request is one vLLM serves with --max-model-len 5010+; kvplan refused it ("exceeds the
    # model's context of 2,048 tokens"). Its state is the same whatever the length:
    # 138,149,888 B per request, x 8 = 1,105,199,104 B.
    path = _mamba_codestral(tmp_path)
    r = run_cli("request", path, "--prompt", "5000", "--output", "10", "--json")
    assert r.code == 0, r.err
    b = run_cli("batch", path, "--batch", "8", "--context", "5000", "--json")
    assert b.code == 0, b.err
    assert b.json()["total_bytes"] == 8 * 138_149_888


def test_linear_attention_layers_without_gated_deltanet_sizes_are_named(tmp_path: Path) -> None:
    # transformers' MiniMaxConfig (MiniMax-Text-01 / M1) writes layer_types of
    # "linear_attention" (lightning) and "full_attention". kvplan took them for Gated DeltaNet
    # and failed with "linear_num_key_heads is missing; it is required to size the KV cache".
    cfg = json.loads(Path(_minimax_m2(tmp_path, [1] * 62)).read_text())
    del cfg["attn_type_list"]
    cfg.update(model_type="minimax", layer_types=(["linear_attention"] * 7 + ["full_attention"])
               * 7 + ["full_attention"] * 6)
    r = run_cli("kv", _write(tmp_path, "minimax-text", cfg))
    assert_one_line_error(r)
    assert "lightning attention" in r.err and "is missing" not in r.err


def test_a_model_type_that_is_not_a_string_does_not_crash_the_mamba1_check(
        tmp_path: Path) -> None:
    # fuzz (config.json field mutations): "model_type": [] reached `[] in frozenset(...)`
    # (TypeError: unhashable type: 'list') in check_decoder_only, a traceback; a non-string
    # model_type reads as unknown, as parse_config already reads it
    raw = {"architectures": ["LlamaForCausalLM"], "model_type": [], "hidden_size": 512,
           "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 2,
           "intermediate_size": 1024, "vocab_size": 1000, "max_position_embeddings": 2048}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert load_model(str(path)).model_type == "unknown"
