"""Hunt 19 (arch19): KV cache layouts of recent architectures read from config.json the way
vLLM 0.11's model files build their attention layers; layouts kvplan cannot size refused in
one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, run_cli


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _step3_text() -> dict[str, Any]:
    """stepfun-ai/step3 text_config (vLLM's Step3TextConfig defaults, transformers_utils/
    configs/step3_vl.py): 64 query heads of 256, ``num_attention_groups`` 1, a 2,048-wide
    shared query (``share_q_dim``), 48 experts top-3 (``moe_top_k``) on layers 4..59."""
    return {
        "architectures": ["Step3TextForCausalLM"], "model_type": "step3_text",
        "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
        "num_attention_heads": 64, "num_attention_groups": 1, "head_dim": 256,
        "share_q_dim": 2048, "max_position_embedding": 65536, "max_seq_len": 65536,
        "moe_intermediate_size": 5120, "moe_num_experts": 48, "moe_top_k": 3,
        "moe_layers_enum": ",".join(str(i) for i in range(4, 60)), "share_expert_dim": 5120,
        "norm_expert_weight": False, "rms_norm_eps": 1e-05, "rope_theta": 500000,
        "vocab_size": 128815, "torch_dtype": "bfloat16"}


def test_step3_attention_is_refused_not_sized_with_every_head(tmp_path: Path) -> None:
    # vLLM step3_text.py builds every layer's Attention with num_kv_heads=1 (it raises for any
    # other value) and a replicated K/V projection: 61 x 1 x 256 x 2 (K, V) x 2 B = 62,464
    # B/token. kvplan read no KV-head key (num_attention_groups is Step3's), took the 64 query
    # heads: 61 x 64 x 256 x 2 x 2 = 3,997,696 B/token (64x) once num_experts_per_tok was
    # given, and for the real file said "num_experts_per_tok is missing; it is required to
    # size the KV cache" (Step3 names it moe_top_k).
    real = run_cli("kv", _write(tmp_path, "step3", _step3_text()))
    assert_one_line_error(real)
    assert "'share_q_dim'" in real.err
    patched = run_cli("kv", _write(tmp_path, "step3b", {**_step3_text(), "num_experts_per_tok": 3}))
    assert_one_line_error(patched)
    assert "'share_q_dim'" in patched.err
    wrapped = {"architectures": ["Step3VLForConditionalGeneration"], "model_type": "step3_vl",
               "text_config": _step3_text(), "vision_config": {"hidden_size": 1792}}
    vl = run_cli("kv", _write(tmp_path, "step3vl", wrapped))
    assert_one_line_error(vl)
    assert "'share_q_dim'" in vl.err


def _longcat_flash() -> dict[str, Any]:
    """meituan-longcat/LongCat-Flash-Chat config.json (fields vLLM's FlashConfig reads): 28
    layers (``num_layers``), MLA latent 512 + rope 64, 512 routed + 256 zero experts top-12."""
    return {
        "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
        "attention_method": "MLA", "vocab_size": 131072, "hidden_size": 6144,
        "ffn_hidden_size": 12288, "expert_ffn_hidden_size": 2048, "num_layers": 28,
        "num_attention_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "n_routed_experts": 512, "zero_expert_num": 256, "zero_expert_type": "identity",
        "moe_topk": 12, "routed_scaling_factor": 6.0, "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True, "rms_norm_eps": 1e-05, "max_position_embeddings": 131072,
        "rope_theta": 10000000.0, "torch_dtype": "bfloat16"}


def test_longcat_flash_two_attention_blocks_per_layer_are_refused(tmp_path: Path) -> None:
    # vLLM longcat_flash.py FlashDecoderLayer: self_attn = ModuleList of 2 DeepseekV2MLA
    # attentions (and 2 dense MLPs beside the MoE), so 2 x 28 latents of 576 x 2 B = 64,512
    # B/token. kvplan refused the real file with "intermediate_size is missing; it is required
    # to size the KV cache", and with intermediate_size given cached 28 x 1,152 = 32,256 B/token
    # (half).
    real = run_cli("kv", _write(tmp_path, "longcat", _longcat_flash()))
    assert_one_line_error(real)
    assert "'model_type'" in real.err and "two MLA attention blocks" in real.err
    given = {**_longcat_flash(), "intermediate_size": 12288, "moe_intermediate_size": 2048}
    patched = run_cli("kv", _write(tmp_path, "longcat2", given))
    assert_one_line_error(patched)
    assert "two MLA attention blocks" in patched.err


def _internvl3_8b() -> dict[str, Any]:
    """OpenGVLab/InternVL3-8B config.json (fields kvplan reads): the language model, Qwen2.5-7B
    shaped, under ``llm_config``; an InternViT under ``vision_config``."""
    llm = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
           "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
           "intermediate_size": 18944, "vocab_size": 151674, "max_position_embeddings": 32768,
           "max_window_layers": 70, "sliding_window": 32768, "use_sliding_window": False,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
           "torch_dtype": "bfloat16"}
    return {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat",
            "llm_config": llm, "downsample_ratio": 0.5, "template": "internvl2_5",
            "torch_dtype": "bfloat16",
            "vision_config": {"architectures": ["InternVisionModel"], "hidden_size": 1024,
                              "num_hidden_layers": 24, "image_size": 448, "patch_size": 14}}


def _deepseek_vl2_small() -> dict[str, Any]:
    """deepseek-ai/deepseek-vl2-small config.json (fields kvplan reads): a DeepSeek-V2 MLA
    language model (kv_lora_rank 512, rope 64, 30 layers) under ``language_config``."""
    lang = {"model_type": "deepseek_v2", "hidden_size": 2560, "num_hidden_layers": 30,
            "num_attention_heads": 20, "num_key_value_heads": 20, "kv_lora_rank": 512,
            "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128, "n_routed_experts": 64, "n_shared_experts": 2,
            "num_experts_per_tok": 6, "moe_intermediate_size": 1408, "intermediate_size": 10944,
            "first_k_dense_replace": 1, "vocab_size": 102400, "max_position_embeddings": 4096,
            "topk_method": "greedy", "use_mla": True, "torch_dtype": "bfloat16"}
    return {"architectures": ["DeepseekVLV2ForCausalLM"], "model_type": "deepseek_vl_v2",
            "language_config": lang, "tile_tag": "2D", "torch_dtype": "bfloat16",
            "vision_config": {"model_type": "vision", "layers": 27, "width": 1152}}


def test_language_model_under_llm_config_or_language_config_is_read(tmp_path: Path) -> None:
    # vLLM reads InternVL's llm_config as its text_config (transformers_utils/config.py
    # _CONFIG_ATTRS_MAPPING) and DeepseekVLV2Config builds text_config from language_config;
    # kvplan read only text_config and refused both files with "hidden_size is missing; it is
    # required to size the KV cache" (the field is in the sub-config).
    # InternVL3-8B: 2 (K, V) x 28 layers x 4 KV heads x 128 x 2 B = 57,344 B/token.
    internvl = run_cli("kv", _write(tmp_path, "internvl", _internvl3_8b()), "--json").json()
    assert internvl["bytes_per_token"] == 2 * 28 * 4 * 128 * 2 == 57_344
    # DeepSeek-VL2-small: MLA, 30 layers x (512 + 64) x 2 B = 34,560 B/token.
    vl2 = run_cli("kv", _write(tmp_path, "vl2", _deepseek_vl2_small()), "--json").json()
    assert vl2["attention"] == "MLA" and vl2["bytes_per_token"] == 30 * 576 * 2 == 34_560
    # capacity still refuses the unpriced vision tower in one line, naming it
    cap = run_cli("capacity", _write(tmp_path, "internvl2", _internvl3_8b()))
    assert_one_line_error(cap)
    assert "InternVLChatModel" in cap.err


def test_ovis_vision_towers_keep_capacity_refused_once_llm_config_is_read(tmp_path: Path) -> None:
    # Ovis2.5 keeps its language model under llm_config (read since the llm_config fix) and its
    # ViT under vit_config (Ovis2: visual_tokenizer_config), keys the unpriced-tower check did
    # not know: capacity would have sized the KV cache without the tower vLLM loads and profiles.
    llm = {"model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 12288, "vocab_size": 151936, "max_position_embeddings": 40960,
           "torch_dtype": "bfloat16"}
    for arch, key in (("Ovis2_5", "vit_config"), ("Ovis", "visual_tokenizer_config")):
        cfg = {"architectures": [arch], "model_type": arch.lower(), "llm_config": llm,
               key: {"hidden_size": 1152}, "torch_dtype": "bfloat16"}
        kv = run_cli("kv", _write(tmp_path, arch, cfg), "--json").json()
        assert kv["bytes_per_token"] == 2 * 36 * 8 * 128 * 2 == 147_456
        cap = run_cli("capacity", _write(tmp_path, arch + "c", cfg))
        assert_one_line_error(cap)
        assert f"{arch} (config key '{key}')" in cap.err


def _gemma3(text: dict[str, Any]) -> dict[str, Any]:
    """A google/gemma-3-*-it config.json: transformers writes only the text_config fields that
    differ from Gemma3TextConfig's defaults (heads 8, KV heads 4, head_dim 256, ...)."""
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "mm_tokens_per_image": 256, "torch_dtype": "bfloat16",
            "text_config": {"model_type": "gemma3_text", "sliding_window": 1024,
                            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, **text},
            "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                              "model_type": "siglip_vision_model", "num_attention_heads": 16,
                              "num_hidden_layers": 27, "patch_size": 14,
                              "vision_use_head": False}}


def test_gemma3_head_dim_left_to_the_class_default_is_256(tmp_path: Path) -> None:
    # google/gemma-3-12b-it's text_config gives 16 heads and 8 KV heads but no head_dim:
    # Gemma3TextConfig's default 256 (vLLM gemma3.py reads config.head_dim). kvplan kept 256 as
    # a family default that _head_dim never read and took 3,840 / 16 = 240:
    # 48 x 8 x 240 x 2 x 2 = 368,640 B/token instead of 48 x 8 x 256 x 2 x 2 = 393,216.
    cfg = _gemma3({"hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48,
                   "num_attention_heads": 16, "num_key_value_heads": 8})
    out = run_cli("kv", _write(tmp_path, "g12", cfg), "--json").json()
    assert {g["head_size"] for g in out["groups"]} == {256}
    assert out["bytes_per_token"] == 48 * 8 * 256 * 2 * 2 == 393_216


def test_gemma3_4b_heads_left_to_the_class_defaults_are_read(tmp_path: Path) -> None:
    # google/gemma-3-4b-it's text_config names neither num_attention_heads nor
    # num_key_value_heads nor head_dim (Gemma3TextConfig's 8, 4, 256; vLLM reads the config
    # object). kvplan refused it: "num_attention_heads is missing; it is required to size the
    # KV cache". 34 layers (29 sliding, 5 full) x 4 x 256 x 2 x 2 = 139,264 B/token.
    cfg = _gemma3({"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34})
    out = run_cli("kv", _write(tmp_path, "g4", cfg), "--json").json()
    kinds = {g["kind"]: (g["num_layers"], g["num_kv_heads"], g["head_size"])
             for g in out["groups"]}
    assert kinds == {"sliding": (29, 4, 256), "full": (5, 4, 256)}
    assert out["bytes_per_token"] == 34 * 4 * 256 * 2 * 2 == 139_264


def test_granite_micro_all_attention_layers_with_mamba_keys_is_plain_attention(
        tmp_path: Path) -> None:
    # ibm-granite/granite-4.0-micro is a GraniteMoeHybridConfig whose config.json keeps the
    # class's mamba_* keys (a top-level config writes every key) while layer_types marks all
    # 40 layers "attention"; vLLM's ModelConfig.is_hybrid says "Handle granite-4.0-micro case
    # which uses hybrid config but does not actually contain any non-attention layers" and
    # serves it as plain attention. kvplan refused it ("has Mamba / linear-attention layers laid
    # out by mamba_d_state, ..."). 40 layers x 8 KV heads x (2,560 / 40 = 64) x 2 x 2 =
    # 81,920 B/token, blocks of 16 (no state page to align to).
    cfg = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
           "hidden_size": 2560, "intermediate_size": 8192, "shared_intermediate_size": 8192,
           "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
           "layer_types": ["attention"] * 40, "num_local_experts": 0, "num_experts_per_tok": 0,
           "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_d_conv": 4,
           "mamba_d_head": 64, "mamba_d_state": 256, "mamba_expand": 2, "mamba_n_groups": 1,
           "mamba_n_heads": 128, "position_embedding_type": "rope", "vocab_size": 100352,
           "max_position_embeddings": 131072, "tie_word_embeddings": True,
           "torch_dtype": "bfloat16"}
    out = run_cli("kv", _write(tmp_path, "micro", cfg), "--json").json()
    assert out["block_size"] == 16 and out["state_bytes_per_request"] == 0
    assert out["bytes_per_token"] == 40 * 8 * 64 * 2 * 2 == 81_920


def test_deepseek_ocr_mha_language_model_ignores_its_zero_v_head_dim(tmp_path: Path) -> None:
    # deepseek-ai/DeepSeek-OCR config.json language_config: use_mla false, kv_lora_rank null,
    # v_head_dim 0 (and qk dims 0), 10 heads of 1,280 / 10 = 128. vLLM serves such a DeepSeek-VL2
    # language model with plain Attention (one head_size for K and V; v_head_dim unread);
    # kvplan read v_head_dim for non-MLA attention and refused the file ("v_head_dim must be
    # positive, got 0"). 12 layers x 10 x 128 x 2 x 2 = 61,440 B/token.
    lang = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
            "hidden_size": 1280, "intermediate_size": 6848, "kv_lora_rank": None,
            "max_position_embeddings": 8192, "moe_intermediate_size": 896, "n_group": 1,
            "n_routed_experts": 64, "n_shared_experts": 2, "num_attention_heads": 10,
            "num_experts_per_tok": 6, "num_hidden_layers": 12, "num_key_value_heads": 10,
            "q_lora_rank": None, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0,
            "first_k_dense_replace": 1, "topk_method": "greedy", "torch_dtype": "bfloat16",
            "use_mla": False, "v_head_dim": 0, "vocab_size": 129280}
    cfg = {"architectures": ["DeepseekOCRForCausalLM"], "model_type": "deepseek_vl_v2",
           "language_config": lang, "tile_tag": "2D", "torch_dtype": "bfloat16",
           "vision_config": {"image_size": 1024, "model_type": "vision"}}
    out = run_cli("kv", _write(tmp_path, "ocr", cfg), "--json").json()
    assert out["attention"] != "MLA"
    assert [(g["head_size"], g["head_size_v"]) for g in out["groups"]] == [(128, 128)]
    assert out["bytes_per_token"] == 12 * 10 * 128 * 2 * 2 == 61_440
