"""config.json parsing: each family quirk on a real bundled file, and ConfigError on bad input."""

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, UnknownNameError
from kvplan.specs.catalog import load_model
from kvplan.specs.hf_config import parse_config


def test_falcon_multi_query_means_one_kv_head() -> None:
    m = load_model("tiiuae/falcon-7b")  # file says num_kv_heads 71, multi_query true
    assert (m.num_attention_heads, m.num_kv_heads, m.head_dim) == (71, 1, 4544 // 71)
    assert m.attention_kind == "MQA"


def test_head_dim_field_wins_over_hidden_over_heads() -> None:
    m = load_model("Qwen/Qwen3-32B")
    assert m.head_dim == 128 and 5120 // 64 == 80
    assert isinstance(load_model("microsoft/Phi-3-mini-4k-instruct").head_dim, int)


def test_mla_latent() -> None:
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert m.mla is not None and m.mla.latent_dim == 576
    assert set(m.layer_kinds) == {"mla"}
    assert m.moe is not None and m.moe.num_experts == 256 and m.moe.first_dense_layers == 3


def test_deepseek_v2_lite_partial_file_defaults() -> None:
    m = load_model("deepseek-ai/DeepSeek-V2-Lite")
    assert m.vocab_size == 102400 and m.mla is not None and m.mla.q_lora_rank is None
    assert any("vocab_size" in n for n in m.notes)


def test_mistral_every_layer_sliding_and_fp32_served_bf16() -> None:
    m = load_model("mistralai/Mistral-7B-v0.1")
    assert m.layer_kinds == ("sliding",) * 32 and m.sliding_window == 4096
    assert m.dtype == "bfloat16" and m.config_dtype == "float32"


def test_gemma2_alternates_sliding_first() -> None:
    m = load_model("google/gemma-2-9b-it")
    assert m.layer_kinds[:4] == ("sliding", "full", "sliding", "full")


def test_gemma3_text_config_five_local_one_global() -> None:
    m = load_model("google/gemma-3-27b-it")
    assert m.num_layers == 62 and m.sliding_window == 1024
    assert [i for i, k in enumerate(m.layer_kinds) if k == "full"] == list(range(5, 62, 6))
    assert m.vocab_size == 262208 and m.tie_word_embeddings  # transformers defaults
    assert any("sliding_window_pattern" in n for n in m.notes)


def test_gpt_oss_layer_types() -> None:
    m = load_model("openai/gpt-oss-20b")
    assert m.layer_kinds[:2] == ("sliding", "full") and m.sliding_window == 128
    assert m.quantization == "mxfp4" and m.moe is not None and m.moe.num_experts == 32


def test_qwen3_next_full_attention_interval() -> None:
    m = load_model("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert [i for i, k in enumerate(m.layer_kinds) if k == "full"] == list(range(3, 48, 4))


def test_nemotron_h_pattern_with_infinity_literal() -> None:
    m = load_model("nvidia/Nemotron-H-56B-Base-8K")
    assert m.layer_kinds.count("mamba") == 54 and m.layer_kinds.count("full") == 10
    assert m.layer_kinds.count("mlp") == 54 and not m.mlp_gated


def test_tied_embeddings_and_moe_fields() -> None:
    assert load_model("meta-llama/Llama-3.2-1B").tie_word_embeddings
    mix = load_model("mistralai/Mixtral-8x7B-v0.1")
    assert mix.moe is not None and (mix.moe.num_experts, mix.moe.experts_per_token) == (8, 2)


def test_kv_head_aliases() -> None:
    base = {
        "hidden_size": 4096,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "vocab_size": 100,
    }
    for key in ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"):
        assert parse_config({**base, key: 2}, name="x", file="x.json").num_kv_heads == 2
    assert parse_config(base, name="x", file="x.json").num_kv_heads == 32  # default: MHA


def test_missing_field_names_field_and_file() -> None:
    with pytest.raises(ConfigError, match=r"num_hidden_layers.*in my/config.json"):
        parse_config(
            {"hidden_size": 4096, "num_attention_heads": 32}, name="x", file="my/config.json"
        )


def test_float_head_count_rejected() -> None:
    with pytest.raises(ConfigError, match="num_attention_heads"):
        parse_config(
            {
                "hidden_size": 4096,
                "num_hidden_layers": 2,
                "num_attention_heads": 32.5,
                "vocab_size": 10,
            },
            name="x",
            file="c.json",
        )


def test_indivisible_hidden_without_head_dim() -> None:
    with pytest.raises(ConfigError, match="head_dim"):
        parse_config(
            {
                "hidden_size": 100,
                "num_hidden_layers": 2,
                "num_attention_heads": 3,
                "vocab_size": 10,
            },
            name="x",
            file="c.json",
        )


def test_local_path_and_folder(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "torch_dtype": "float16",
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).num_kv_heads == 2
    assert load_model(str(tmp_path / "config.json")).head_dim == 128


def test_malformed_json(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_model(str(bad))
    assert bad.read_text() == "{not json"  # the user's file is untouched


def test_unknown_model() -> None:
    with pytest.raises(UnknownNameError, match="kvplan models"):
        load_model("acme/no-such-model")
