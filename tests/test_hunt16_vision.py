"""Hunt 16 (capacity of multimodal models): vision towers and vLLM 0.11's encoder profiling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, run_cli

# A Mistral-Small-3.1-24B-style config (Mistral3ForConditionalGeneration: a Pixtral vision
# tower of 24 layers of 1024 beside a 40-layer Mistral text model), written out for the test.
MISTRAL3_TEXT = {"head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                 "intermediate_size": 32768, "max_position_embeddings": 131072,
                 "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40,
                 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0,
                 "sliding_window": None, "vocab_size": 131072}
MISTRAL3 = {"architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10,
            "model_type": "mistral3", "multimodal_projector_bias": False,
            "projector_hidden_act": "gelu", "spatial_merge_size": 2,
            "text_config": MISTRAL3_TEXT, "torch_dtype": "bfloat16",
            "vision_config": {"head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
                              "image_size": 1540, "intermediate_size": 4096,
                              "model_type": "pixtral", "num_attention_heads": 16,
                              "num_hidden_layers": 24, "patch_size": 14, "rope_theta": 10000.0},
            "vision_feature_layer": -1}


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def test_an_unpriced_vision_tower_is_refused_not_priced_as_its_text_model(tmp_path: Path) -> None:
    """vLLM 0.11 builds Mistral3ForConditionalGeneration's Pixtral tower and projector, loads
    their weights and encodes a batch of dummy images in the profiling run before it sizes the
    KV cache. kvplan priced the config as its text model alone (no tower weights, no encoder
    pass), so "GPU KV cache size" came out too large, silently. Now a memory plan of a tower
    kvplan does not price is refused in one line; --kv-cache-memory (which skips the estimate)
    and `kv` (bytes per token: the tower caches nothing) still answer."""
    mm = _write(tmp_path, "mistral3.json", MISTRAL3)
    for command in (("capacity",), ("latency", "--prompt", "100", "--output", "10"),
                    ("simulate", "--num-prompts", "5")):
        r = run_cli(*command, mm, "--gpu", "h100-sxm-80gb")
        assert_one_line_error(r)
        assert "Mistral3ForConditionalGeneration (config key 'vision_config')" in r.err
        assert "--kv-cache-memory" in r.err
    given = run_cli("capacity", mm, "--gpu", "h100-sxm-80gb", "--kv-cache-memory", "20GiB",
                    "--json")
    assert given.code == 0, given.err
    # 40 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 163,840 B a token, 16-token blocks
    assert given.json()["num_blocks"] == 20 * 2**30 // (16 * 163_840) == 8_192
    assert run_cli("kv", mm).code == 0
    text = {**MISTRAL3_TEXT, "architectures": ["MistralForCausalLM"], "torch_dtype": "bfloat16"}
    assert run_cli("capacity", _write(tmp_path, "text.json", text), "--gpu",
                   "h100-sxm-80gb").code == 0


GEMMA3 = "google/gemma-3-27b-it"


def test_gemma3_profiling_keeps_its_dummy_image_embeddings() -> None:
    """vLLM 0.11 ``profile_run`` encodes a batch of dummy images and keeps their embeddings in
    the encoder cache while the language model's dummy pass runs: they add to the profiled
    peak. An image takes 256 embeddings in a placeholder of 260 prompt tokens ('\\n\\n'
    <start_of_image> 256 x <image_soft_token> <end_of_image> '\\n\\n'), the encoder budget is
    max_num_batched_tokens, so 8192 // 260 = 31 images (vLLM's log of gemma-3-27b-it:
    "Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 31
    image items of the maximum feature size"); each output is copied into a zeroed 260 x 5376
    bf16 tensor: 31 x 260 x 5376 x 2 B = 86,661,120 B (82.65 MiB) that kvplan left out.
    H100, --max-model-len 32768: KV 10,832,537,760 -> 10,745,876,640 B, blocks of 10 x 128 KiB
    8,264 -> 8,198."""
    from kvplan.costs.memory.settings import resolve_settings
    from kvplan.costs.memory.vision import encoder_cache_bytes
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    model = load_model(GEMMA3)
    h100 = load_gpu("h100-sxm-80gb")
    held = 31 * 260 * 5376 * 2
    assert held == 86_661_120
    s = resolve_settings(model, h100, EngineConfig(max_model_len=32768))
    assert encoder_cache_bytes(model, s) == held
    # 2048 tokens: 2048 // 260 = 7 images; --max-num-seqs 2 with --max-model-len 300 leaves
    # 2 requests x max(1, 300 // 260) images = 2
    small = resolve_settings(model, h100, EngineConfig(max_num_batched_tokens=2048))
    assert encoder_cache_bytes(model, small) == 7 * 260 * 5376 * 2
    few = resolve_settings(model, h100, EngineConfig(max_num_seqs=2, max_model_len=300))
    assert encoder_cache_bytes(model, few) == 2 * 260 * 5376 * 2
    assert encoder_cache_bytes(load_model("google/gemma-2-27b"), s) == 0  # text-only
    doc = run_cli("capacity", GEMMA3, "--max-model-len", "32768", "--json").json()
    assert doc["available_kv_bytes"] == 10_832_537_760 - held == 10_745_876_640
    assert doc["num_blocks"] == 10_745_876_640 // (10 * 128 * 1024) == 8_198


def test_gemma3_encoder_pass_can_set_the_profiled_peak() -> None:
    """vLLM 0.11 runs the dummy encoder pass before the language model's dummy pass; with a
    small --max-num-seqs (sampler logits small) its peak is the higher one, and kvplan priced
    only the language model's. gemma-3-27b-it, 31 dummy images of 896 px in 14 px patches
    (31 x 4096 = 126,976 tokens): float32 pixels + their bf16 copy 31 x 3 x 896^2 x (4 + 2) =
    447,971,328 B, plus one SigLIP MLP's residual, layer_norm2 output, fc1 output and GELU
    output 126,976 x (2 x 1152 + 2 x 4304) x 2 B = 2,771,124,224 B: 3,219,095,552 B. The
    language model's pass at --max-num-seqs 8: hidden + residual 2 x 8192 x 5376 x 2 B =
    176,160,768, the held embeddings 86,661,120, and max(8 x 262,208 logits x 38 B,
    8192 x 3 x 21504 x 2 B = 1,056,964,608): 1,319,786,496 B. H100 at 32k: KV
    19,891,949,728 -> 17,992,640,672 B, 15,176 -> 13,727 blocks; at vLLM's default 1024
    sequences the language model's 9.75 GiB stays the peak (8,198 blocks, unchanged)."""
    from kvplan.costs.memory.settings import resolve_settings
    from kvplan.costs.memory.vision import encoder_pass_bytes
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    model = load_model(GEMMA3)
    s = resolve_settings(model, load_gpu("h100-sxm-80gb"),
                         EngineConfig(max_model_len=32768, max_num_seqs=8))
    encoder = 31 * 3 * 896**2 * 6 + 31 * 4096 * (2 * 1152 + 2 * 4304) * 2
    assert encoder_pass_bytes(model, s) == encoder == 3_219_095_552
    language = 2 * 8192 * 5376 * 2 + 31 * 260 * 5376 * 2 + 8192 * 3 * 21504 * 2
    assert language == 1_319_786_496 < encoder
    doc = run_cli("capacity", GEMMA3, "--max-model-len", "32768", "--max-num-seqs", "8",
                  "--json").json()
    assert doc["activation_bytes"] == encoder
    assert doc["available_kv_bytes"] == 19_891_949_728 - (encoder - language) == 17_992_640_672
    assert doc["num_blocks"] == 17_992_640_672 // (10 * 128 * 1024) == 13_727
    assert run_cli("capacity", GEMMA3, "--max-model-len", "32768",
                   "--json").json()["num_blocks"] == 8_198


def test_a_tower_is_named_without_architectures_and_when_its_config_is_empty(
        tmp_path: Path) -> None:
    """An empty vision_config is still a tower (transformers fills its defaults) and was
    priced as the text model; a config without an architectures list was named 'unknown'
    in the refusal. Both now refuse, naming the model_type where no architecture is given."""
    bare = {k: v for k, v in MISTRAL3.items() if k != "architectures"}
    r = run_cli("capacity", _write(tmp_path, "bare.json", bare), "--gpu", "h100-sxm-80gb")
    assert_one_line_error(r)
    assert "model_type 'mistral3' (config key 'vision_config')" in r.err
    empty = {**MISTRAL3, "vision_config": {}}
    r = run_cli("capacity", _write(tmp_path, "empty.json", empty), "--gpu", "h100-sxm-80gb")
    assert_one_line_error(r)
    assert "Mistral3ForConditionalGeneration (config key 'vision_config')" in r.err
